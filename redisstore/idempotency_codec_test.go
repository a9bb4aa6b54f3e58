package redisstore

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency/driver"
)

// FuzzIdemTime checks the property the Lua scripts rely on: the strings compare exactly as the
// instants do, and decode back to the same instant.
func FuzzIdemTime(f *testing.F) {
	f.Add(int64(0), int64(1))
	f.Add(int64(-1), int64(0))
	f.Add(int64(math.MinInt64), int64(math.MaxInt64))
	f.Add(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano(), time.Date(2026, 3, 1, 12, 0, 0, 1, time.UTC).UnixNano())
	f.Fuzz(func(t *testing.T, a, b int64) {
		ta, tb := time.Unix(0, a), time.Unix(0, b)
		sa, sb := idemTime(ta), idemTime(tb)
		require.Len(t, sa, idemTimeLen)
		require.Equal(t, a < b, sa < sb)
		require.Equal(t, a == b, sa == sb)
		back, err := idemParseTime(sa)
		require.NoError(t, err)
		require.True(t, back.Equal(ta))
	})
}

func TestIdemParseTimeRejects(t *testing.T) {
	for _, s := range []string{"", "123", "1234567890123456789x", "99999999999999999999", "-0000000000000000001"} {
		t.Run(s, func(t *testing.T) {
			_, err := idemParseTime(s)
			require.Error(t, err)
		})
	}
}

func TestIdemTTL(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		d    time.Duration
		want int64
	}{
		{"past", -time.Hour, 1},
		{"now", 0, 1},
		{"one nanosecond rounds up", time.Nanosecond, 1},
		{"exact", 24 * time.Hour, 86_400_000},
		{"just over", time.Second + time.Nanosecond, 1001},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, idemTTL(now, now.Add(tc.d))) })
	}
	require.Equal(t, now.UnixMilli(), idemMillisCeil(now))
	require.Equal(t, now.UnixMilli()+1, idemMillisCeil(now.Add(time.Nanosecond)))
}

// TestIdemParseClaimRejects: a reply that is not what the scripts send is an error, never a claim.
func TestIdemParseClaimRejects(t *testing.T) {
	var fp driver.Fingerprint
	ts := idemTime(time.Unix(0, 0))
	cases := []struct {
		name string
		res  []any
	}{
		{"empty", nil},
		{"unknown kind", []any{"x", int64(1)}},
		{"zero token", []any{"n", "0"}},
		{"token not a number", []any{"n", "1e+15"}},
		{"token not a string", []any{"n", int64(1)}},
		{"in flight without lease", []any{"i", int64(1)}},
		{"in flight bad lease", []any{"i", int64(1), "soon"}},
		{"completed short", []any{"c", int64(1), ts}},
		{"completed bad status", []any{"c", int64(1), ts, "ok", nil, nil}},
		{"completed bad header", []any{"c", int64(1), ts, "200", "{", nil}},
		{"completed header not string", []any{"c", int64(1), ts, "200", int64(1), nil}},
		{"completed body not string", []any{"c", int64(1), ts, "200", nil, int64(1)}},
		{"mismatch short", []any{"f", "i", string(fp[:])}},
		{"mismatch bad state", []any{"f", "z", string(fp[:]), ts}},
		{"mismatch bad fingerprint", []any{"f", "c", "short", ts}},
		{"mismatch bad lease", []any{"f", "c", string(fp[:]), "x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := idemParseClaim(tc.res, fp, time.Time{})
			require.Error(t, err)
		})
	}
	c, err := idemParseClaim([]any{"c", int64(1), ts, "200", `{"Content-Type":["a/b"]}`, "body"}, fp, time.Time{})
	require.NoError(t, err)
	require.Equal(t, driver.Response{Status: 200, Header: http.Header{"Content-Type": {"a/b"}}, Body: []byte("body")}, *c.Response)
}
