package jsonstr

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func encode(t testing.TB, s string, html bool) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}))
}

var cases = []string{
	"", "plain", `quote " and \ backslash`, "\x00\x01\b\f\n\r\t\x1f\x7f", "<a href='x'>&amp;</a>",
	"héllo wörld ✓ 𝄞", "bad \xff utf8 \xc3", "line\u2028para\u2029end", "\xed\xa0\x80 surrogate",
}

func TestMatchesEncodingJSON(t *testing.T) {
	for _, s := range cases {
		require.Equal(t, encode(t, s, false), string(Append(nil, s)), "%q", s)
		require.Equal(t, encode(t, s, true), string(AppendHTMLSafe(nil, s)), "%q", s)
	}
}

func TestAppendContentInParts(t *testing.T) {
	b := append([]byte{'"'}, AppendContent(nil, `https://x.test/"p"/`, false)...)
	b = AppendContent(b, "code\n", false)
	b = append(b, '"')
	require.Equal(t, encode(t, `https://x.test/"p"/code`+"\n", false), string(b))
	require.Equal(t, "pre", string(AppendContent([]byte("pre"), "", true)))
}

func FuzzMatchesEncodingJSON(f *testing.F) {
	for _, s := range cases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(Append(nil, s)), encode(t, s, false); got != want {
			t.Fatalf("Append(%q) = %s, want %s", s, got, want)
		}
		if got, want := string(AppendHTMLSafe(nil, s)), encode(t, s, true); got != want {
			t.Fatalf("AppendHTMLSafe(%q) = %s, want %s", s, got, want)
		}
	})
}
