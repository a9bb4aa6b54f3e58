package versiontest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckPair(t *testing.T) {
	upper := func(in []byte) ([]byte, error) { return []byte(`{"a":"B"}`), nil }
	write := func(t *testing.T, dir, name, body string) string {
		p := filepath.Join(dir, name)
		if body != "" {
			require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		}
		return p
	}
	cases := []struct {
		name, in, out string
		apply         func([]byte) ([]byte, error)
		wantErr       string
	}{
		{"match ignoring layout and key order", `{"a": "b"}`, "{\n \"a\" : \"B\"}", upper, ""},
		{"mismatch", `{"a":"b"}`, `{"a":"C"}`, upper, "differs"},
		{"numbers compared digit for digit", `{"n":1}`, `{"a":"B","n":1.0}`,
			func([]byte) ([]byte, error) { return []byte(`{"a":"B","n":1}`), nil }, "differs"},
		{"missing input", "", `{}`, upper, "golden input"},
		{"missing output", `{"a":"b"}`, "", upper, "golden output"},
		{"transform changes nothing", `{"a":"B"}`, `{"a":"B"}`, upper, "changed nothing"},
		{"transform fails", `{"a":"b"}`, `{}`, func([]byte) ([]byte, error) { return nil, errors.New("boom") }, "boom"},
		{"input not JSON", `{"a":`, `{}`, upper, "not JSON"},
		{"output not JSON", `{"a":"b"}`, `{"a":"B"} x`, upper, "not JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			in, out := write(t, dir, "in.json", tc.in), write(t, dir, "out.json", tc.out)
			err := checkPair(false, in, out, tc.apply)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
	t.Run("update writes the output", func(t *testing.T) {
		dir := t.TempDir()
		in, out := write(t, dir, "in.json", `{"a":"b"}`), filepath.Join(dir, "out.json")
		require.NoError(t, checkPair(true, in, out, upper))
		require.NoError(t, checkPair(false, in, out, upper))
		got, err := os.ReadFile(out)
		require.NoError(t, err)
		require.Equal(t, "{\n  \"a\": \"B\"\n}\n", string(got))
	})
}
