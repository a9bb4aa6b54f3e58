package apierror_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
)

type item struct {
	SKU string `json:"sku"`
	Qty int32  `json:"qty"`
}

type embedded struct {
	Note string `json:"note"`
}

type order struct {
	Account string            `json:"account"`
	Side    string            `json:"side"`
	Items   []item            `json:"items"`
	Meta    map[string]int    `json:"meta"`
	Tags    map[string]string `json:"tags"`
	Price   float64           `json:"price"`
	Count   uint8             `json:"count"`
	Paid    bool              `json:"paid"`
	Extra   any               `json:"extra"`
	When    time.Time         `json:"when"`
	Ref     *item             `json:"ref"`
	Legacy  int               `json:"legacy,string"`
	Ignored string            `json:"-"`
	embedded
}

func decode(t *testing.T, body string, opts *apierror.DecodeOptions) (*order, *apierror.Error) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(body))
	var o order
	err := apierror.Decode(req, &o, opts)
	if err == nil {
		return &o, nil
	}
	var p *apierror.Error
	require.True(t, errors.As(err, &p), "decode failures are problems: %v", err)
	return &o, p
}

func TestDecodeLocatesEveryFailure(t *testing.T) {
	tests := []struct {
		name, body, code, pointer string
		status                    int
		detail                    string // substring
	}{
		{"syntax error offset", `{"account": "a",, }`, "malformed_json", "", 400, "byte offset 16"},
		{"truncated", `{"account": "a"`, "malformed_json", "", 400, "byte offset 15"},
		{"empty body", ``, "body_missing", "", 400, "required"},
		{"blank body", "  \n", "body_missing", "", 400, "required"},
		{"trailing data", `{"account":"a"} {"x":1}`, "trailing_data", "", 400, "byte offset 16"},
		{"trailing garbage", `{"account":"a"}x`, "trailing_data", "", 400, "byte offset 15"},
		{"wrong type top", `{"account": 12}`, "wrong_type", "/account", 400, "must be a string, got number"},
		{"wrong type nested index", `{"items":[{"sku":"a","qty":1},{"sku":"b","qty":"two"}]}`, "wrong_type", "/items/1/qty", 400, "must be an integer"},
		{"int overflow", `{"items":[{"qty":99999999999}]}`, "wrong_type", "/items/0/qty", 400, "32 bits"},
		{"fraction into int", `{"items":[{"qty":1.5}]}`, "wrong_type", "/items/0/qty", 400, "integer"},
		{"negative into uint", `{"count":-1}`, "wrong_type", "/count", 400, "non-negative"},
		{"object for array", `{"items":{"sku":"a"}}`, "wrong_type", "/items", 400, "must be an array, got object"},
		{"array for string", `{"side":["buy"]}`, "wrong_type", "/side", 400, "got array"},
		{"bool for number", `{"price":true}`, "wrong_type", "/price", 400, "got boolean"},
		{"string for bool", `{"paid":"yes"}`, "wrong_type", "/paid", 400, "must be a boolean, got string"},
		{"map value type", `{"meta":{"a/b":"x"}}`, "wrong_type", "/meta/a~1b", 400, "integer"},
		{"pointer struct", `{"ref":{"qty":"x"}}`, "wrong_type", "/ref/qty", 400, "integer"},
		{"unknown top", `{"account":"a","sied":"buy"}`, "unknown_field", "/sied", 400, "not a known field"},
		{"unknown nested", `{"items":[{"sku":"a"},{"sku":"b","colour":"red"}]}`, "unknown_field", "/items/1/colour", 400, "not a known"},
		{"unknown after skip", `{"extra":{"deep":[1,{"x":2}]},"nope":1}`, "unknown_field", "/nope", 400, ""},
		{"dash field is unknown", `{"Ignored":"x"}`, "unknown_field", "/Ignored", 400, ""},
		{"custom unmarshaler", `{"when":"yesterday"}`, "invalid_value", "/when", 400, "yesterday"},
		{"root not object", `[1,2]`, "wrong_type", "", 400, "must be an object, got array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, p := decode(t, tt.body, nil)
			require.NotNil(t, p, "expected a problem")
			require.Equal(t, tt.status, p.Status)
			require.Len(t, p.Errors, 1)
			v := p.Errors[0]
			require.Equal(t, apierror.LocationBody, v.Location)
			require.Equal(t, tt.code, v.Code, v.Detail)
			if tt.code != "malformed_json" {
				require.Equal(t, tt.pointer, v.Pointer, v.Detail)
			}
			require.Contains(t, v.Detail, tt.detail)
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	o, p := decode(t, `{"account":"acc_1","side":"buy","items":[{"sku":"a","qty":2}],"meta":{"k":1},
		"price":1.5,"count":255,"paid":true,"extra":{"any":[1,"x",null]},"when":"2026-01-02T03:04:05Z",
		"ref":null,"legacy":"42","note":"hi","ACCOUNT":"acc_1"}`, nil)
	require.Nil(t, p)
	require.Equal(t, "acc_1", o.Account)
	require.Equal(t, int32(2), o.Items[0].Qty)
	require.Equal(t, 42, o.Legacy)
	require.Equal(t, "hi", o.Note)
}

func TestDecodeAllowUnknown(t *testing.T) {
	o, p := decode(t, `{"account":"a","future_field":{"x":1}}`, &apierror.DecodeOptions{AllowUnknownFields: true})
	require.Nil(t, p)
	require.Equal(t, "a", o.Account)
	_, p = decode(t, `{"future_field":1,"account":5}`, &apierror.DecodeOptions{AllowUnknownFields: true})
	require.Equal(t, "/account", p.Errors[0].Pointer)
}

func TestDecodeSizeCap(t *testing.T) {
	body := `{"account":"` + strings.Repeat("a", 100) + `"}`
	_, p := decode(t, body, &apierror.DecodeOptions{MaxBytes: 50})
	require.Equal(t, http.StatusRequestEntityTooLarge, p.Status)
	require.Equal(t, "body_too_large", p.Code)

	// Without a Content-Length the cap still holds: the reader stops at MaxBytes+1.
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.ContentLength = -1
	var o order
	err := apierror.Decode(req, &o, &apierror.DecodeOptions{MaxBytes: 50})
	var pe *apierror.Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 413, pe.Status)

	// http.MaxBytesReader set by a server in front is honoured too.
	req = httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	req.Body = http.MaxBytesReader(rec, req.Body, 20)
	err = apierror.Decode(req, &o, nil)
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 413, pe.Status)
}

func TestDecodeBadDestination(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{}`))
	var o order
	err := apierror.Decode(req, o, nil) // not a pointer: a programming error, not a client error
	require.Error(t, err)
	var p *apierror.Error
	require.False(t, errors.As(err, &p))
}

func TestDecodeNilBody(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	req.Body = nil
	var o order
	var p *apierror.Error
	require.ErrorAs(t, apierror.Decode(req, &o, nil), &p)
	require.Equal(t, "body_missing", p.Code)
}

// FuzzDecode feeds arbitrary bodies to the strict decoder: it must never panic, and every failure must be
// a located 4xx problem that conforms, whose pointer names a member the body has, and whose syntax-error
// offset is the byte encoding/json stopped at.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"account":"a","side":"buy"}`, `{"items":[{"qty":"x"}]}`, `{"a":1}`, `[`, `{"meta":{"k":"v"}}`,
		`{"account":1e400}`, `{"count":256}`, `{"when":1}`, `{"legacy":"x"}`, `"\ud800"`, `{"extra":[[[[]]]]}`, `nul`,
		`{"flag":"true","addr":"::1","blob":"AQI=","fixed":[1,2],"any":[{"a~b/c":1e999}]}`, `{"intmap":{"x":"y"}}`,
		`{"AddrMap":{"1.2.3.4":1}}`, `{"dom":{"x":"s"},"amb":{"Y":1}}`, `{"legacy":" 1"}`, `{"ACCOUNT":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, dst := range []any{new(order), new(awkward), new(any), new([]item)} {
			err := apierror.DecodeBytes(body, dst, nil)
			if err == nil {
				continue
			}
			var p *apierror.Error
			if !errors.As(err, &p) {
				t.Fatalf("non-problem error for client input %q: %v", body, err)
			}
			if p.Status < 400 || p.Status > 499 || len(p.Errors) == 0 {
				t.Fatalf("unlocated failure for %q: %+v", body, p)
			}
			v := p.Errors[0]
			if v.Location != apierror.LocationBody || (v.Pointer != "" && v.Pointer[0] != '/') || v.Code == "" || v.Detail == "" {
				t.Fatalf("bad violation for %q: %+v", body, v)
			}
			var syn *json.SyntaxError
			if uerr := json.Unmarshal(body, new(any)); errors.As(uerr, &syn) && v.Code == "malformed_json" {
				want := syn.Offset - 1
				if atEOF := syn.Offset == int64(len(body)); atEOF && (syn.Error() == "unexpected end of JSON input" ||
					strings.HasPrefix(syn.Error(), "invalid character ' '") && body[len(body)-1] != ' ') {
					want = int64(len(body)) // the input ended inside a value; encoding/json blames a space it imagines there
				}
				if got := p.Extensions["offset"]; got != want {
					t.Fatalf("syntax error in %q reported at offset %v, encoding/json says %d", body, got, want)
				}
			} else if v.Code != "malformed_json" && v.Code != "body_missing" && v.Code != "trailing_data" {
				if v.Pointer == "" && v.Code != "wrong_type" && v.Code != "invalid_value" {
					t.Fatalf("%s for %q not located by a pointer: %+v", v.Code, body, v)
				}
				if !pointerExists(body, v.Pointer) {
					t.Fatalf("pointer %q names nothing in %q (%+v)", v.Pointer, body, v)
				}
			}
			rec := httptest.NewRecorder()
			apierror.Write(rec, httptest.NewRequest(http.MethodPost, "/", nil), err)
			if cerr := apierror.Check(rec.Code, rec.Header(), rec.Body.Bytes()); cerr != nil {
				t.Fatalf("non-conforming problem for %q: %v", body, cerr)
			}
		}
	})
}

// pointerExists reports whether an RFC 6901 pointer names a value in the first JSON value of data.
func pointerExists(data []byte, pointer string) bool {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil {
		return false
	}
	if pointer == "" {
		return true
	}
	for _, tok := range strings.Split(pointer[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch node := doc.(type) {
		case map[string]any:
			var ok bool
			if doc, ok = node[tok]; !ok {
				return false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(node) || strconv.Itoa(i) != tok {
				return false
			}
			doc = node[i]
		default:
			return false
		}
	}
	return true
}

type deepX struct {
	X string `json:"x"`
}
type midX struct{ deepX }
type nearX struct {
	X int `json:"x"`
}

// dominant mirrors encoding/json's rule: the shallower embedded field wins whatever the walk order.
type dominant struct {
	midX
	nearX
}

type ambY1 struct{ Y int }
type ambY2 struct{ Y string }

// ambiguous has two fields named Y at the same depth: encoding/json drops both, so Y is unknown.
type ambiguous struct {
	ambY1
	ambY2
}

// midX2 embeds deepX like midX, so a struct embedding both has x twice at one depth: ambiguous.
type midX2 struct{ deepX }

type awkward struct {
	Legacy  int            `json:"legacy,string"`
	Flag    bool           `json:"flag,omitempty,string"`
	When    time.Time      `json:"when"`
	Addr    netip.Addr     `json:"addr"`
	Blob    []byte         `json:"blob"`
	Fixed   [1]int         `json:"fixed"`
	Any     any            `json:"any"`
	IntMap  map[int]string `json:"intmap"`
	AddrMap map[netip.Addr]int
	Dom     dominant  `json:"dom"`
	Amb     ambiguous `json:"amb"`
	Twice   struct {
		midX
		midX2
	} `json:"twice"`
	Other bool `json:"other"`
}

// Every failure names the member that failed, whatever the tag options, custom unmarshalers, map key
// types, array lengths and embedding rules in the destination.
func TestDecodeLocatesAwkwardTypes(t *testing.T) {
	tests := []struct{ name, body, code, pointer string }{
		{"string option, bad content", `{"legacy":"x"}`, "wrong_type", "/legacy"},
		{"string option, unquoted", `{"legacy":12}`, "wrong_type", "/legacy"},
		{"string option, fraction", `{"legacy":"1.5"}`, "wrong_type", "/legacy"},
		{"string option after other options", `{"flag":"yes"}`, "wrong_type", "/flag"},
		{"custom unmarshaler refuses", `{"when":"yesterday"}`, "invalid_value", "/when"},
		{"custom unmarshaler wrong type", `{"when":1}`, "invalid_value", "/when"},
		{"text unmarshaler refuses", `{"addr":"nope"}`, "invalid_value", "/addr"},
		{"text unmarshaler wrong type", `{"addr":1}`, "wrong_type", "/addr"},
		{"bytes not base64", `{"blob":"!!"}`, "wrong_type", "/blob"},
		{"array elements past its length are ignored", `{"fixed":[1,"x"],"other":1}`, "wrong_type", "/other"},
		{"number out of range inside any", `{"any":[1,{"k":1e400}]}`, "wrong_type", "/any/1/k"},
		{"int map key", `{"intmap":{"1":"a","b~/":"c"}}`, "wrong_type", "/intmap/b~0~1"},
		{"text map key", `{"AddrMap":{"nope":1}}`, "invalid_value", "/AddrMap/nope"},
		{"shallower embedded field wins", `{"dom":{"x":"s"}}`, "wrong_type", "/dom/x"},
		{"ambiguous embedded field is unknown", `{"amb":{"Y":1}}`, "unknown_field", "/amb/Y"},
		{"field embedded twice at one depth is unknown", `{"twice":{"x":"s"}}`, "unknown_field", "/twice/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dst awkward
			err := apierror.DecodeBytes([]byte(tt.body), &dst, nil)
			var p *apierror.Error
			require.ErrorAs(t, err, &p)
			require.Len(t, p.Errors, 1)
			require.Equal(t, tt.code, p.Errors[0].Code, p.Errors[0].Detail)
			require.Equal(t, tt.pointer, p.Errors[0].Pointer, p.Errors[0].Detail)
			require.Contains(t, p.Detail, "body "+tt.pointer+":", "the detail names the member")
		})
	}
	var ok awkward
	require.NoError(t, apierror.DecodeBytes([]byte(`{"legacy":"7","flag":"true","when":null,"addr":"10.0.0.1",
		"blob":"AQI=","fixed":[1,"ignored"],"any":[1,{"k":2}],"intmap":{"1":"a"},"AddrMap":{"::1":1},
		"dom":{"x":3}}`), &ok, nil))
	require.Equal(t, 7, ok.Legacy)
	require.Equal(t, 3, ok.Dom.nearX.X)
}
