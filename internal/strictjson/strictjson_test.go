package strictjson_test

import (
	"encoding/json"
	"errors"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/internal/strictjson"
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

// refused decodes data into dst and returns the refusal, failing the test when there is none.
func refused(t *testing.T, data []byte, dst any, opts strictjson.Options) *strictjson.Error {
	t.Helper()
	err := strictjson.Decode(data, dst, opts)
	var e *strictjson.Error
	require.ErrorAs(t, err, &e, "want a refusal of %q", data)
	return e
}

// Every refusal says what is wrong and where: a pointer to the member, array indices included, or
// the byte offset of a syntax error.
func TestDecodeLocatesEveryRefusal(t *testing.T) {
	tests := []struct {
		name, body string
		kind       strictjson.Kind
		pointer    string
		offset     int64  // Syntax and TrailingData
		detail     string // substring
	}{
		{"syntax error offset", `{"account": "a",, }`, strictjson.Syntax, "", 16, "invalid character"},
		{"truncated", `{"account": "a"`, strictjson.Syntax, "", 15, "unexpected end of JSON input"},
		{"truncated in a literal", `{"paid": tru`, strictjson.Syntax, "", 12, "unexpected end of JSON input"},
		{"blank", "  ", strictjson.Syntax, "", 2, "unexpected end of JSON input"},
		{"trailing data", `{"account":"a"} {"x":1}`, strictjson.TrailingData, "", 16, "byte offset 16"},
		{"trailing garbage", `{"account":"a"}x`, strictjson.TrailingData, "", 15, "byte offset 15"},
		{"wrong type top", `{"account": 12}`, strictjson.WrongType, "/account", 0, "must be a string, got number"},
		{"wrong type nested index", `{"items":[{"sku":"a","qty":1},{"sku":"b","qty":"two"}]}`, strictjson.WrongType, "/items/1/qty", 0, "must be an integer"},
		{"int overflow", `{"items":[{"qty":99999999999}]}`, strictjson.WrongType, "/items/0/qty", 0, "32 bits"},
		{"fraction into int", `{"items":[{"qty":1.5}]}`, strictjson.WrongType, "/items/0/qty", 0, "integer"},
		{"negative into uint", `{"count":-1}`, strictjson.WrongType, "/count", 0, "non-negative"},
		{"object for array", `{"items":{"sku":"a"}}`, strictjson.WrongType, "/items", 0, "must be an array, got object"},
		{"array for string", `{"side":["buy"]}`, strictjson.WrongType, "/side", 0, "got array"},
		{"bool for number", `{"price":true}`, strictjson.WrongType, "/price", 0, "got boolean"},
		{"string for bool", `{"paid":"yes"}`, strictjson.WrongType, "/paid", 0, "must be a boolean, got string"},
		{"map value type", `{"meta":{"a/b":"x"}}`, strictjson.WrongType, "/meta/a~1b", 0, "integer"},
		{"pointer struct", `{"ref":{"qty":"x"}}`, strictjson.WrongType, "/ref/qty", 0, "integer"},
		{"root not object", `[1,2]`, strictjson.WrongType, "", 0, "must be an object, got array"},
		{"unknown top", `{"account":"a","sied":"buy"}`, strictjson.UnknownField, "/sied", 0, "not a known field"},
		{"unknown nested", `{"items":[{"sku":"a"},{"sku":"b","colour":"red"}]}`, strictjson.UnknownField, "/items/1/colour", 0, "not a known"},
		{"unknown after skip", `{"extra":{"deep":[1,{"x":2}]},"nope":1}`, strictjson.UnknownField, "/nope", 0, ""},
		{"dash field is unknown", `{"Ignored":"x"}`, strictjson.UnknownField, "/Ignored", 0, ""},
		{"name in another case", `{"ACCOUNT":"acc_1"}`, strictjson.UnknownField, "/ACCOUNT", 0, "not a known field"},
		{"name in mixed case", `{"account":"a","Side":"buy"}`, strictjson.UnknownField, "/Side", 0, ""},
		{"custom unmarshaler", `{"when":"yesterday"}`, strictjson.InvalidValue, "/when", 0, "yesterday"},
		{"duplicate member", `{"side":"buy","side":"sell"}`, strictjson.DuplicateMember, "/side", 0, "more than once"},
		{"duplicate spelt with an escape", `{"side":"buy","\u0073ide":"sell"}`, strictjson.DuplicateMember, "/side", 0, ""},
		{"duplicate nested in an array", `{"items":[{"sku":"a"},{"sku":"b","qty":1,"qty":2}]}`, strictjson.DuplicateMember, "/items/1/qty", 0, ""},
		{"duplicate in a map", `{"meta":{"a":1,"a":2}}`, strictjson.DuplicateMember, "/meta/a", 0, ""},
		{"duplicate in an interface value", `{"extra":{"x":[{"k":1,"k":1}]}}`, strictjson.DuplicateMember, "/extra/x/0/k", 0, ""},
		{"duplicate past the small-object limit", `{"meta":{` + manyMembers(40) + `,"k3":0}}`, strictjson.DuplicateMember, "/meta/k3", 0, ""},
		{"invalid UTF-8 in a value", "{\"account\":\"a\xffb\"}", strictjson.InvalidUTF8, "/account", 0, "not valid UTF-8"},
		{"invalid UTF-8 in a name", "{\"acc\xc3\":1}", strictjson.InvalidUTF8, "/acc\ufffd", 0, ""},
		{"truncated UTF-8 sequence", "{\"note\":\"\xe2\x82\"}", strictjson.InvalidUTF8, "/note", 0, ""},
		{"escaped lone high surrogate", `{"note":"a\ud800b"}`, strictjson.InvalidUTF8, "/note", 0, "surrogate"},
		{"escaped lone low surrogate", `{"note":"\udc00"}`, strictjson.InvalidUTF8, "/note", 0, "surrogate"},
		{"high surrogate then not a low one", `{"note":"\ud800\u0041"}`, strictjson.InvalidUTF8, "/note", 0, "surrogate"},
		{"invalid UTF-8 deep in an array", "{\"items\":[{\"sku\":\"ok\"},{\"sku\":\"\xc0\xaf\"}]}", strictjson.InvalidUTF8, "/items/1/sku", 0, ""},
		{"a syntax error wins over a violation before it", `{"side":"a","side":"b",}`, strictjson.Syntax, "", 23, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o order
			e := refused(t, []byte(tt.body), &o, strictjson.Options{})
			require.Equal(t, tt.kind, e.Kind, e.Detail)
			require.Equal(t, tt.pointer, e.Pointer, e.Detail)
			require.Equal(t, tt.offset, e.Offset, e.Detail)
			require.Contains(t, e.Detail, tt.detail)
			require.Contains(t, e.Error(), e.Detail)
		})
	}
}

func manyMembers(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = strconv.Quote("k"+strconv.Itoa(i)) + ":" + strconv.Itoa(i)
	}
	return strings.Join(parts, ",")
}

func TestDecodeAccepts(t *testing.T) {
	var o order
	require.NoError(t, strictjson.Decode([]byte(`{"account":"acc_1","side":"buy","items":[{"sku":"a","qty":2}],"meta":{"k":1},
		"price":1.5,"count":255,"paid":true,"extra":{"any":[1,"x",null]},"when":"2026-01-02T03:04:05Z",
		"ref":null,"legacy":"42","note":"hi \ud83d\ude00"}`), &o, strictjson.Options{}))
	require.Equal(t, "acc_1", o.Account)
	require.Equal(t, int32(2), o.Items[0].Qty)
	require.Equal(t, 42, o.Legacy)
	require.Equal(t, "hi \U0001F600", o.Note)
}

// With AllowUnknownFields, a member that matches a field only when case is ignored is an unknown
// member: dropped, with its comma, never decoded into the field, wherever it stands.
func TestDecodeAllowUnknownDropsCaseVariants(t *testing.T) {
	allow := strictjson.Options{AllowUnknownFields: true}
	for _, body := range []string{
		`{"account":"a","future_field":{"x":1}}`,
		`{"ACCOUNT":"evil"}`, `{"account":"a","ACCOUNT":"evil"}`, `{"ACCOUNT":"evil","account":"a"}`,
		`{"ACCOUNT":"evil" , "note":"n", "Account":{"x":[1]}}`, `{"items":[{"SKU":"evil","sku":"s"}],"account":"a"}`,
		`{ "Account" : "evil" }`, `{"account":"a" ,"ACCOUNT":"evil" ,"AcCoUnT":"evil"}`,
	} {
		var o order
		require.NoError(t, strictjson.Decode([]byte(body), &o, allow), body)
		require.NotEqual(t, "evil", o.Account, body)
		if len(o.Items) > 0 {
			require.Equal(t, "s", o.Items[0].SKU, body)
		}
	}
	// Duplicates and invalid UTF-8 are refused with unknown members allowed too.
	var o order
	require.Equal(t, strictjson.DuplicateMember, refused(t, []byte(`{"future":1,"future":2}`), &o, allow).Kind)
	require.Equal(t, strictjson.InvalidUTF8, refused(t, []byte("{\"future\":\"\xff\"}"), &o, allow).Kind)
	require.Equal(t, "/account", refused(t, []byte(`{"future_field":1,"account":5}`), &o, allow).Pointer)
}

func TestDecodeBadDestination(t *testing.T) {
	for _, dst := range []any{nil, order{}, (*order)(nil)} {
		err := strictjson.Decode([]byte(`{}`), dst, strictjson.Options{})
		var inv *json.InvalidUnmarshalError
		require.ErrorAs(t, err, &inv, "%T", dst)
		var e *strictjson.Error
		require.False(t, errors.As(err, &e), "a bad destination is a programming error, not a refusal")
	}
}

// A recursive type's shape is built once and refers to itself.
func TestDecodeRecursiveType(t *testing.T) {
	type node struct {
		Name     string  `json:"name"`
		Children []*node `json:"children"`
	}
	var n node
	require.NoError(t, strictjson.Decode([]byte(`{"name":"a","children":[{"name":"b","children":[{"name":"c"}]}]}`), &n, strictjson.Options{}))
	require.Equal(t, "c", n.Children[0].Children[0].Name)
	e := refused(t, []byte(`{"name":"a","children":[{"name":"b","children":[{"nam":"c"}]}]}`), &n, strictjson.Options{})
	require.Equal(t, "/children/0/children/0/nam", e.Pointer)
}

func TestPointer(t *testing.T) {
	require.Equal(t, "", strictjson.Pointer())
	require.Equal(t, "/items/3/qty", strictjson.Pointer("items", "3", "qty"))
	require.Equal(t, "/a~1b/~0c/", strictjson.Pointer("a/b", "~c", ""))
}

// FuzzDecode checks the decoder against encoding/json on arbitrary input: it never panics; what it
// accepts holds nothing encoding/json would have let through silently, and encoding/json reads the
// same value from it; every refusal is located, by a pointer that names a member the input has or
// by the byte offset encoding/json stopped at.
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
		for _, opts := range []strictjson.Options{{}, {AllowUnknownFields: true}} {
			for _, dst := range []any{new(order), new(awkward), new(any), new([]item)} {
				checkDecode(t, body, dst, opts)
			}
		}
	})
}

func checkDecode(t *testing.T, body []byte, dst any, opts strictjson.Options) {
	err := strictjson.Decode(body, dst, opts)
	if err == nil {
		if !utf8.Valid(body) || hasLoneSurrogate(body) {
			t.Fatalf("accepted a body that is not UTF-8: %q", body)
		}
		if dup, ok := duplicateMember(body); ok {
			t.Fatalf("accepted %q, which repeats member %q", body, dup)
		}
		if opts.AllowUnknownFields {
			return // encoding/json would decode the case variants the decoder dropped
		}
		same := reflect.New(reflect.TypeOf(dst).Elem()).Interface()
		if uerr := json.Unmarshal(body, same); uerr != nil || !reflect.DeepEqual(dst, same) {
			t.Fatalf("accepted %q as %#v; encoding/json reads %#v (%v)", body, dst, same, uerr)
		}
		return
	}
	var e *strictjson.Error
	if !errors.As(err, &e) {
		t.Fatalf("not a refusal for input %q: %v", body, err)
	}
	if e.Kind < strictjson.Syntax || e.Kind > strictjson.InvalidValue || e.Detail == "" || (e.Pointer != "" && e.Pointer[0] != '/') {
		t.Fatalf("bad refusal for %q: %+v", body, e)
	}
	if e.Kind == strictjson.Syntax && json.Valid(body) {
		t.Fatalf("valid JSON %q refused as a syntax error: %+v", body, e)
	}
	var syn *json.SyntaxError
	if uerr := json.Unmarshal(body, new(any)); errors.As(uerr, &syn) && e.Kind == strictjson.Syntax {
		want := syn.Offset - 1
		if atEOF := syn.Offset == int64(len(body)); atEOF && (syn.Error() == "unexpected end of JSON input" ||
			strings.HasPrefix(syn.Error(), "invalid character ' '") && body[len(body)-1] != ' ') {
			want = int64(len(body)) // the input ended inside a value; encoding/json blames a space it imagines there
		}
		if e.Offset != want {
			t.Fatalf("syntax error in %q reported at offset %d, encoding/json says %d", body, e.Offset, want)
		}
	} else if e.Kind != strictjson.Syntax && e.Kind != strictjson.TrailingData {
		if e.Pointer == "" && e.Kind != strictjson.WrongType && e.Kind != strictjson.InvalidValue && e.Kind != strictjson.InvalidUTF8 {
			t.Fatalf("%+v for %q not located by a pointer", e, body)
		}
		// With a repeated member, encoding/json keeps the last, and the pointer may name the first.
		if _, dup := duplicateMember(body); !dup && !pointerExists(body, e.Pointer) {
			t.Fatalf("pointer %q names nothing in %q (%+v)", e.Pointer, body, e)
		}
	}
}

// duplicateMember reports a member name some object of body repeats.
func duplicateMember(body []byte) (string, bool) {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	type frame struct {
		object bool
		names  map[string]bool
		key    bool // the next string token of an object is a name
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{':
				stack = append(stack, &frame{object: true, names: map[string]bool{}, key: true})
			case '[':
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].key = true
				}
			}
			continue
		case string:
			if top != nil && top.object && top.key {
				if top.names[tok] {
					return tok, true
				}
				top.names[tok] = true
				top.key = false
				continue
			}
		}
		if top != nil && top.object {
			top.key = true
		}
	}
}

// hasLoneSurrogate reports whether body holds an escaped surrogate that is not half of a pair.
func hasLoneSurrogate(body []byte) bool {
	s := string(body)
	for i := 0; i+6 <= len(s); i++ {
		if s[i] == '\\' && s[i+1] == '\\' {
			i++
			continue
		}
		if s[i] != '\\' || s[i+1] != 'u' {
			continue
		}
		r, err := strconv.ParseUint(s[i+2:i+6], 16, 16)
		if err != nil || r < 0xD800 || r > 0xDFFF {
			continue
		}
		if r >= 0xDC00 || i+12 > len(s) || s[i+6] != '\\' || s[i+7] != 'u' {
			return true
		}
		r2, err := strconv.ParseUint(s[i+8:i+12], 16, 16)
		if err != nil || r2 < 0xDC00 || r2 > 0xDFFF {
			return true
		}
		i += 11
	}
	return false
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
	tests := []struct {
		name, body string
		kind       strictjson.Kind
		pointer    string
	}{
		{"string option, bad content", `{"legacy":"x"}`, strictjson.WrongType, "/legacy"},
		{"string option, unquoted", `{"legacy":12}`, strictjson.WrongType, "/legacy"},
		{"string option, fraction", `{"legacy":"1.5"}`, strictjson.WrongType, "/legacy"},
		{"string option after other options", `{"flag":"yes"}`, strictjson.WrongType, "/flag"},
		{"custom unmarshaler refuses", `{"when":"yesterday"}`, strictjson.InvalidValue, "/when"},
		{"custom unmarshaler wrong type", `{"when":1}`, strictjson.InvalidValue, "/when"},
		{"text unmarshaler refuses", `{"addr":"nope"}`, strictjson.InvalidValue, "/addr"},
		{"text unmarshaler wrong type", `{"addr":1}`, strictjson.WrongType, "/addr"},
		{"bytes not base64", `{"blob":"!!"}`, strictjson.WrongType, "/blob"},
		{"array elements past its length are ignored", `{"fixed":[1,"x"],"other":1}`, strictjson.WrongType, "/other"},
		{"number out of range inside any", `{"any":[1,{"k":1e400}]}`, strictjson.WrongType, "/any/1/k"},
		{"int map key", `{"intmap":{"1":"a","b~/":"c"}}`, strictjson.WrongType, "/intmap/b~0~1"},
		{"text map key", `{"AddrMap":{"nope":1}}`, strictjson.InvalidValue, "/AddrMap/nope"},
		{"shallower embedded field wins", `{"dom":{"x":"s"}}`, strictjson.WrongType, "/dom/x"},
		{"ambiguous embedded field is unknown", `{"amb":{"Y":1}}`, strictjson.UnknownField, "/amb/Y"},
		{"field embedded twice at one depth is unknown", `{"twice":{"x":"s"}}`, strictjson.UnknownField, "/twice/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dst awkward
			e := refused(t, []byte(tt.body), &dst, strictjson.Options{})
			require.Equal(t, tt.kind, e.Kind, e.Detail)
			require.Equal(t, tt.pointer, e.Pointer, e.Detail)
			require.NotEmpty(t, e.Detail)
		})
	}
	var ok awkward
	require.NoError(t, strictjson.Decode([]byte(`{"legacy":"7","flag":"true","when":null,"addr":"10.0.0.1",
		"blob":"AQI=","fixed":[1,"ignored"],"any":[1,{"k":2}],"intmap":{"1":"a"},"AddrMap":{"::1":1},
		"dom":{"x":3}}`), &ok, strictjson.Options{}))
	require.Equal(t, 7, ok.Legacy)
	require.Equal(t, 3, ok.Dom.nearX.X)
}
