package apierror_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
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
	req.Header.Set("Content-Type", "application/json")
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
		// What encoding/json lets through silently.
		{"duplicate member", `{"side":"buy","side":"sell"}`, "duplicate_member", "/side", 400, "more than once"},
		{"duplicate spelt with an escape", `{"side":"buy","\u0073ide":"sell"}`, "duplicate_member", "/side", 400, ""},
		{"duplicate nested in an array", `{"items":[{"sku":"a"},{"sku":"b","qty":1,"qty":2}]}`, "duplicate_member", "/items/1/qty", 400, ""},
		{"duplicate in a map", `{"meta":{"a":1,"a":2}}`, "duplicate_member", "/meta/a", 400, ""},
		{"duplicate in an interface value", `{"extra":{"x":[{"k":1,"k":1}]}}`, "duplicate_member", "/extra/x/0/k", 400, ""},
		{"name in another case", `{"ACCOUNT":"acc_1"}`, "unknown_field", "/ACCOUNT", 400, "not a known field"},
		{"name in mixed case", `{"account":"a","Side":"buy"}`, "unknown_field", "/Side", 400, ""},
		{"invalid UTF-8 in a value", "{\"account\":\"a\xffb\"}", "invalid_utf8", "/account", 400, "not valid UTF-8"},
		{"invalid UTF-8 in a name", "{\"acc\xc3\":1}", "invalid_utf8", "/acc\ufffd", 400, ""},
		{"truncated UTF-8 sequence", "{\"note\":\"\xe2\x82\"}", "invalid_utf8", "/note", 400, ""},
		{"escaped lone high surrogate", `{"note":"a\ud800b"}`, "invalid_utf8", "/note", 400, "surrogate"},
		{"escaped lone low surrogate", `{"note":"\udc00"}`, "invalid_utf8", "/note", 400, "surrogate"},
		{"high surrogate then not a low one", `{"note":"\ud800\u0041"}`, "invalid_utf8", "/note", 400, "surrogate"},
		{"invalid UTF-8 deep in an array", "{\"items\":[{\"sku\":\"ok\"},{\"sku\":\"\xc0\xaf\"}]}", "invalid_utf8", "/items/1/sku", 400, ""},
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
		"ref":null,"legacy":"42","note":"hi"}`, nil)
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
	// A member that matches a field only when case is ignored is an unknown member: ignored, never
	// decoded into the field, wherever it stands.
	allow := &apierror.DecodeOptions{AllowUnknownFields: true}
	for _, body := range []string{
		`{"ACCOUNT":"evil"}`, `{"account":"a","ACCOUNT":"evil"}`, `{"ACCOUNT":"evil","account":"a"}`,
		`{"ACCOUNT":"evil" , "note":"n", "Account":{"x":[1]}}`, `{"items":[{"SKU":"evil","sku":"s"}],"account":"a"}`,
		`{"account":"a","ACCOUNT":"evil","Account":"evil"}`, // two dropped in a row, last in their object
	} {
		o, p := decode(t, body, allow)
		require.Nil(t, p, body)
		require.NotEqual(t, "evil", o.Account, body)
		if len(o.Items) > 0 {
			require.Equal(t, "s", o.Items[0].SKU, body)
		}
	}
	// Duplicates and invalid UTF-8 are refused with unknown members allowed too.
	_, p = decode(t, `{"future":1,"future":2}`, allow)
	require.Equal(t, "duplicate_member", p.Code)
	_, p = decode(t, "{\"future\":\"\xff\"}", allow)
	require.Equal(t, "invalid_utf8", p.Code)
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
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = -1
	var o order
	err := apierror.Decode(req, &o, &apierror.DecodeOptions{MaxBytes: 50})
	var pe *apierror.Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 413, pe.Status)

	// http.MaxBytesReader set by a server in front is honoured too.
	req = httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	req.Body = http.MaxBytesReader(rec, req.Body, 20)
	err = apierror.Decode(req, &o, nil)
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 413, pe.Status)
}

func TestDecodeBadDestination(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
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
// a located 4xx problem that conforms, with the offset of a syntax error as its "offset" member. That
// the decoder agrees with encoding/json, and locates by a pointer the body has, is the parser's own
// fuzz test (internal/strictjson).
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
			if _, ok := p.Extensions["offset"].(int64); ok != (v.Code == "malformed_json") {
				t.Fatalf("%s for %q with offset member %v", v.Code, body, p.Extensions["offset"])
			}
			if !strings.HasPrefix(p.Detail, "body") {
				t.Fatalf("the detail of %q does not name the body: %q", body, p.Detail)
			}
			rec := httptest.NewRecorder()
			apierror.Write(rec, httptest.NewRequest(http.MethodPost, "/", nil), err)
			if cerr := apierror.Check(rec.Code, rec.Header(), rec.Body.Bytes()); cerr != nil {
				t.Fatalf("non-conforming problem for %q: %v", body, cerr)
			}
		}
	})
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
