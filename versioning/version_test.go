package versioning_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/versioning"
)

// Version.Number parses a name: the one way, now that the parser is not exported, for a team to check
// a version name it was given.
func TestVersionNumber(t *testing.T) {
	cases := []struct {
		name string
		num  int
		ok   bool
	}{
		{"v1", 1, true},
		{"v0", 0, true},
		{"v42", 42, true},
		{"v999999999", 999999999, true},
		{"v1000000000", 0, false}, // ten digits
		{"v01", 0, false},
		{"v00", 0, false},
		{"V1", 0, false},
		{"v", 0, false},
		{"", 0, false},
		{"1", 0, false},
		{"v1.2", 0, false},
		{"v-1", 0, false},
		{"v+1", 0, false},
		{"v1 ", 0, false},
		{"v１", 0, false}, // full-width digit
		{"2024-01-01", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := versioning.Version{Name: tc.name}.Number()
			require.Equal(t, tc.ok, n >= 0)
			if tc.ok {
				require.Equal(t, tc.num, n)
				require.Equal(t, tc.name, "v"+strconv.Itoa(n))
			} else {
				require.Equal(t, -1, n)
			}
		})
	}
}

func TestParsePath(t *testing.T) {
	cases := []struct {
		path, name, rest string
		ok               bool
	}{
		{"/v1/orders", "v1", "/orders", true},
		{"/v2/orders/ord_1", "v2", "/orders/ord_1", true},
		{"/v12", "v12", "", true},
		{"/v1/", "v1", "/", true},
		{"/v1//x", "v1", "//x", true},
		{"/v999999999/x", "v999999999", "/x", true},
		{"/v1000000000/x", "", "", false},
		{"/v1234567890123", "", "", false},
		{"/orders", "", "", false},
		{"/", "", "", false},
		{"", "", "", false},
		{"v1/orders", "", "", false},
		{"//v1/orders", "", "", false},
		{"/V1/orders", "", "", false},
		{"/v01/orders", "", "", false},
		{"/v1.1/orders", "", "", false},
		{"/v1orders", "", "", false},
		{"/v/orders", "", "", false},
		{"/healthz", "", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			name, rest, ok := versioning.ParsePath(tc.path)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.name, name)
			require.Equal(t, tc.rest, rest)
		})
	}
}

// FuzzParsePath checks the parser of the untrusted first path segment: it never panics, accepts
// exactly "/" + a well-formed name + ("" or "/…"), and splits losslessly.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"/v1/orders", "/v12", "/v0/", "/v01/x", "//v1", "/V1", "/v1234567890/x", "", "/", "/v\xff/x", "/v1%2F/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		name, rest, ok := versioning.ParsePath(path)
		if !ok {
			if name != "" || rest != "" {
				t.Fatalf("rejected %q but returned %q, %q", path, name, rest)
			}
			// A rejected path must not start with a well-formed segment.
			if strings.HasPrefix(path, "/") {
				seg, _, _ := strings.Cut(path[1:], "/")
				if (versioning.Version{Name: seg}).Number() >= 0 {
					t.Fatalf("rejected %q although its first segment %q is a version", path, seg)
				}
			}
			return
		}
		if "/"+name+rest != path {
			t.Fatalf("split of %q is lossy: %q + %q", path, name, rest)
		}
		if rest != "" && rest[0] != '/' {
			t.Fatalf("rest of %q does not start a new segment: %q", path, rest)
		}
		if n := (versioning.Version{Name: name}).Number(); n < 0 || "v"+strconv.Itoa(n) != name {
			t.Fatalf("accepted a malformed name %q", name)
		}
	})
}

// FuzzVersionNumber checks that the accepted names are exactly the canonical spellings of numbers.
func FuzzVersionNumber(f *testing.F) {
	for _, s := range []string{"v1", "v0", "v01", "V1", "v", "v999999999", "v1000000000", "v٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := versioning.Version{Name: s}.Number()
		if n == -1 {
			return
		}
		if n < 0 || "v"+strconv.Itoa(n) != s {
			t.Fatalf("Version{Name: %q}.Number() = %d, which formats differently", s, n)
		}
	})
}

func TestVersionLifecycleMethods(t *testing.T) {
	v := versioning.Version{Name: "v1", Released: v1Released, Deprecated: v1Deprecated, Sunset: v1Sunset}
	cases := []struct {
		at                                      time.Time
		released, deprecated, sunset, supported bool
	}{
		{v1Released.Add(-time.Nanosecond), false, false, false, false},
		{v1Released, true, false, false, true},
		{v1Deprecated.Add(-time.Nanosecond), true, false, false, true},
		{v1Deprecated, true, true, false, true},
		{v1Sunset.Add(-time.Nanosecond), true, true, false, true},
		{v1Sunset, true, true, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.at.Format(time.RFC3339Nano), func(t *testing.T) {
			require.Equal(t, tc.released, v.IsReleased(tc.at))
			require.Equal(t, tc.deprecated, v.IsDeprecated(tc.at))
			require.Equal(t, tc.sunset, v.IsSunset(tc.at))
			require.Equal(t, tc.supported, v.IsSupported(tc.at))
		})
	}
	always := versioning.Version{Name: "v2"}
	require.True(t, always.IsSupported(time.Time{}))
	require.False(t, always.IsDeprecated(testNow))
}
