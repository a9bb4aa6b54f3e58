package pgstore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
)

// newTestCache returns a cache of size on an injected clock, serving as a listener that has just
// confirmed LISTEN would make it.
func newTestCache(t *testing.T, size int) (*cache[string, int], *pgtest.Clock) {
	t.Helper()
	clock := pgtest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	c := newCache[string, int](size, "ch", parseLicensee)
	c.now = clock.Now
	c.start(clock.Now())
	return c, clock
}

// fillKey reads k as Get does: a miss, then a fill under the miss's ticket.
func fillKey(c *cache[string, int], k string, v int) {
	if _, ok, ticket := c.get(k); !ok {
		c.fill(k, v, ticket)
	}
}

// TestCacheBound: however many distinct keys are read, the cache holds at most its size, and the
// least recently used key is the one that leaves.
func TestCacheBound(t *testing.T) {
	c, _ := newTestCache(t, 3)
	for i := range 1000 {
		fillKey(c, fmt.Sprint("k", i), i)
		require.LessOrEqual(t, c.len(), 3)
	}
	require.Equal(t, 3, c.len())

	c.start(c.now()) // empty again
	fillKey(c, "a", 1)
	fillKey(c, "b", 2)
	fillKey(c, "c", 3)
	_, ok, _ := c.get("a") // a is now the most recent; b the least
	require.True(t, ok)
	fillKey(c, "d", 4)
	for k, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		_, ok, _ := c.get(k)
		require.Equal(t, want, ok, k)
	}
}

// TestCacheDropsBeatFills: a read that began before a drop — of any key, or everything — does not
// fill, since it may have read the row the drop was about.
func TestCacheDropsBeatFills(t *testing.T) {
	for _, tc := range []struct {
		name string
		drop func(c *cache[string, int])
	}{
		{"the key", func(c *cache[string, int]) { c.drop("k") }},
		{"another key", func(c *cache[string, int]) { c.drop("other") }},
		{"a notification", func(c *cache[string, int]) { c.invalidate("k") }},
		{"a notification of everything", func(c *cache[string, int]) { c.invalidate("") }},
		{"a match", func(c *cache[string, int]) { c.dropIf(func(int) bool { return false }) }},
		{"a new connection", func(c *cache[string, int]) { c.start(c.now()) }},
		{"a lost connection", func(c *cache[string, int]) { c.stop() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newTestCache(t, 10)
			_, ok, ticket := c.get("k")
			require.False(t, ok)
			tc.drop(c) // while the read is at the database
			c.fill("k", 1, ticket)
			require.Zero(t, c.len())
		})
	}
}

// TestCacheNotifications: a payload drops its key; "" (a TRUNCATE) drops everything; a payload the
// credential cache cannot read drops everything too, rather than nothing.
func TestCacheNotifications(t *testing.T) {
	c, _ := newTestCache(t, 10)
	fillKey(c, "a", 1)
	fillKey(c, "b", 2)
	c.invalidate("a")
	_, ok, _ := c.get("a")
	require.False(t, ok)
	_, ok, _ = c.get("b")
	require.True(t, ok)
	c.invalidate("")
	require.Zero(t, c.len())

	h := apikey.HashKey("sk_sandbox_x")
	got, ok := parseKeyHash(fmt.Sprintf("%x", h[:]))
	require.True(t, ok)
	require.Equal(t, h, got)
	for _, bad := range []string{"", "zz", strings.Repeat("g", 64), fmt.Sprintf("%x", h[:31])} {
		_, ok := parseKeyHash(bad)
		require.False(t, ok, bad)
	}
}

// TestCacheWindow: the cache serves for one second after the start of the listener's last confirmed
// round trip and not a moment longer, whatever it holds; a later confirmation extends it, an older
// one does not shorten it. Not serving, it neither answers nor fills.
func TestCacheWindow(t *testing.T) {
	c, clock := newTestCache(t, 10)
	t0 := clock.Now()
	fillKey(c, "a", 1)
	clock.Advance(cacheWindow - time.Nanosecond)
	_, ok, _ := c.get("a")
	require.True(t, ok, "within the window")
	clock.Advance(time.Nanosecond)
	_, ok, ticket := c.get("a")
	require.False(t, ok, "the window has lapsed: the listener proved nothing for a second")
	require.Equal(t, noTicket, ticket)
	c.fill("b", 2, ticket)
	c.fill("b", 2, c.gen)
	_, ok, _ = c.get("b")
	require.False(t, ok)

	c.confirm(clock.Now()) // a ping that began now came back
	_, ok, _ = c.get("a")
	require.True(t, ok, "rows kept through a late ping are still true: no notification was missed")
	c.confirm(t0) // an older ping coming back late
	clock.Advance(cacheWindow - time.Nanosecond)
	_, ok, _ = c.get("a")
	require.True(t, ok)

	c.stop()
	_, ok, _ = c.get("a")
	require.False(t, ok)
	require.Zero(t, c.len())
}

// TestCacheChannel: the channel fits PostgreSQL's 63 bytes whatever the names, and differs by kind,
// schema and table.
func TestCacheChannel(t *testing.T) {
	long := strings.Repeat("x", 200)
	seen := map[string]bool{}
	for _, ch := range []string{
		cacheChannel("credentials", "", "t"), cacheChannel("pins", "", "t"),
		cacheChannel("credentials", "s", "t"), cacheChannel("credentials", "", "s\x00t"),
		cacheChannel("credentials", long, long),
	} {
		require.LessOrEqual(t, len(ch), 63, ch)
		require.False(t, seen[ch], ch)
		seen[ch] = true
	}
}

// BenchmarkCacheGet is a hit, the path of every authenticated request with a cache.
func BenchmarkCacheGet(b *testing.B) {
	c := newCache[apikey.KeyHash, apikey.Credential](10_000, "ch", parseKeyHash)
	c.start(time.Now().Add(time.Hour))
	h := apikey.HashKey("sk_sandbox_x")
	_, _, ticket := c.get(h)
	c.fill(h, apikey.Credential{ID: "key_1", Hash: h}, ticket)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, _ := c.get(h); !ok {
			b.Fatal("miss")
		}
	}
}
