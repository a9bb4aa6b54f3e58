package versioning

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

// stdDecode and stdEncode are what the codec must agree with.
func stdDecode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errNotJSON
	}
	// Decode stops after the value; anything but whitespace after it is an error.
	if rest := bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, errNotJSON
	}
	return v, nil
}

func stdEncode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

var codecSeeds = []string{
	`{"a":1,"b":[true,false,null,"x"],"c":{"d":-0.5e+10}}`,
	`"plain"`, `"esc\"aped\\ \/ \b\f\n\r\t \u00e9 \ud83d\ude00 \u2028"`, "\"bad utf8 \xff\xfe\"",
	"\"raw \u2028 line sep and <>&\"", `[]`, `{}`, `  [1, 2 , 3 ]  `, `{"dup":1,"dup":2}`,
	`-0`, `0.0e0`, `1E-7`, `123456789012345678901234567890`, `01`, `1.`, `.5`, `-`, `1e`, `+1`,
	`[1,]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `[1 2]`, `tru`, `nul`, `"unterminated`, "\"ctl \x01\"",
	`{"a":1} x`, `{"a":1}{}`, ``, ` `, `"\u00"`, `"\x"`, `[[[[[]]]]]`,
}

// FuzzCodec holds the codec to encoding/json: the same values, the same errors, the same bytes.
func FuzzCodec(f *testing.F) {
	for _, s := range codecSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantErr := stdDecode(data)
		got, gotErr := parseJSON(data)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("%q: encoding/json error %v, codec error %v", data, wantErr, gotErr)
		}
		if wantErr != nil {
			return
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("%q: encoding/json %#v, codec %#v", data, want, got)
		}
		wantOut, err := stdEncode(want)
		if err != nil {
			t.Fatal(err)
		}
		gotOut, err := appendJSON(nil, got)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(wantOut, gotOut) {
			t.Fatalf("%q: encoding/json wrote %q, codec %q", data, wantOut, gotOut)
		}
	})
}

func TestCodecDepthLimit(t *testing.T) {
	deep := bytes.Repeat([]byte("["), maxJSONDepth+1)
	_, err := parseJSON(deep)
	check(t, err != nil, "nesting beyond encoding/json's limit is refused")
	ok := append(bytes.Repeat([]byte("["), maxJSONDepth), bytes.Repeat([]byte("]"), maxJSONDepth)...)
	_, err = parseJSON(ok)
	check(t, err == nil, "nesting at the limit is accepted: %v", err)
}

// Values a transform may add that the decoder never produces are encoded as encoding/json would.
func TestCodecForeignValues(t *testing.T) {
	type item struct {
		N int    `json:"n"`
		S string `json:"s,omitempty"`
	}
	cases := []any{
		map[string]any{"int": 3, "float": 1.5, "big": 1e21, "tiny": 1e-7, "struct": item{N: 1}, "strs": []string{"a", "<b>"}},
		map[string]any(nil), []any(nil), map[string]string{"z": "1", "a": "2"}, json.RawMessage(`{"raw":true}`),
		json.Number(""), int64(math.MaxInt64), uint8(7), []map[string]any{{"a": nil}},
	}
	for _, v := range cases {
		want, err := stdEncode(v)
		check(t, err == nil, "%v", err)
		got, err := appendJSON(nil, v)
		check(t, err == nil, "%v", err)
		check(t, bytes.Equal(want, got), "%#v: want %s, got %s", v, want, got)
	}
	for _, bad := range []any{json.Number("1.2.3"), json.Number("NaN"), math.Inf(1), map[string]any{"ch": make(chan int)}} {
		_, wantErr := stdEncode(bad)
		_, gotErr := appendJSON(nil, bad)
		check(t, wantErr != nil && gotErr != nil, "%#v must not encode", bad)
	}
}

func check(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Fatalf(format, args...)
	}
}
