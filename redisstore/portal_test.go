package redisstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/internal/testkit/faultproxy"
	"github.com/svcplatform/conventions/portal"
	"github.com/svcplatform/conventions/portal/portaltest"
	"github.com/svcplatform/conventions/redisstore"
	"github.com/svcplatform/conventions/redisstore/internal/redistest"
)

func TestPortalStoreConformance(t *testing.T) {
	portaltest.Run(t, func(t *testing.T) portal.Store {
		client, prefix := redistest.Client(t)
		return must(redisstore.NewPortalStore(client, &redisstore.PortalStoreOptions{Prefix: prefix}))
	})
}

// TestPortalStoreCluster runs the suite through a Redis Cluster of three masters of the test's own:
// every command touches one key, so the store works whichever master holds it.
func TestPortalStoreCluster(t *testing.T) {
	nodes := redistest.StartCluster(t, 3)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: 32})
	t.Cleanup(func() { _ = client.Close() })
	s := must(redisstore.NewPortalStore(client, nil))
	portaltest.Run(t, func(*testing.T) portal.Store { return s })
}

// portalKey is a key as the Portal derives it: a SHA-256 in hex.
func portalKey(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// portalT0 is a fixed instant: the store computes a TTL from the now it is given and compares with
// it, never reading a clock.
var portalT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func portalSession(perms []string, expires time.Time) portal.Session {
	return portal.Session{Licensee: "lic_a", Environment: apikey.Live, KeyID: "key_a", Permissions: perms, Version: "v2",
		ExpiresAt: expires}
}

// The key, the value (the Session's JSON, null and [] apart) and the TTL, rounded up to the
// millisecond, as the store documents them.
func TestPortalStoreKeysAndTTL(t *testing.T) {
	client, prefix := redistest.Client(t)
	s := must(redisstore.NewPortalStore(client, &redisstore.PortalStoreOptions{Prefix: prefix}))
	ctx := t.Context()
	for name, tc := range map[string]struct {
		perms []string
		json  string
	}{
		"full": {nil, `"permissions":null`},
		"none": {[]string{}, `"permissions":[]`},
		"some": {[]string{"events:read"}, `"permissions":["events:read"]`},
	} {
		t.Run(name, func(t *testing.T) {
			k := portalKey(name)
			ttl := 10*time.Minute + 400*time.Microsecond
			require.NoError(t, s.Put(ctx, k, portalSession(tc.perms, portalT0.Add(ttl)), portalT0))
			v, err := client.Get(ctx, prefix+"portal:{"+k+"}").Result()
			require.NoError(t, err)
			require.Contains(t, v, tc.json)
			require.Contains(t, v, `"licensee":"lic_a"`)
			pttl, err := client.PTTL(ctx, prefix+"portal:{"+k+"}").Result()
			require.NoError(t, err)
			require.LessOrEqual(t, pttl, 10*time.Minute+time.Millisecond, "rounded up to the millisecond")
			require.Greater(t, pttl, 10*time.Minute-time.Second)
		})
	}
	// A TTL under a millisecond is one millisecond: the entry is written, with a TTL.
	k := portalKey("short")
	require.NoError(t, s.Put(ctx, k, portalSession(nil, portalT0.Add(time.Microsecond)), portalT0))
	_, err := s.Get(ctx, k, portalT0)
	require.True(t, err == nil || errors.Is(err, portal.ErrNotFound), "Get: %v", err)
}

// An entry expired on arrival deletes what its key held, in Redis too, rather than be written.
func TestPortalStoreExpiredPutDeletes(t *testing.T) {
	client, prefix := redistest.Client(t)
	s := must(redisstore.NewPortalStore(client, &redisstore.PortalStoreOptions{Prefix: prefix}))
	ctx := t.Context()
	k := portalKey("k")
	require.NoError(t, s.Put(ctx, k, portalSession(nil, portalT0.Add(time.Hour)), portalT0))
	require.NoError(t, s.Put(ctx, k, portalSession(nil, portalT0), portalT0))
	n, err := client.Exists(ctx, prefix+"portal:{"+k+"}").Result()
	require.NoError(t, err)
	require.Zero(t, n)
}

// The Portal's clock has nanoseconds; Redis's TTL milliseconds: the check on reading ends an entry
// at its ExpiresAt exactly.
func TestPortalStoreExpiryNanoseconds(t *testing.T) {
	client, prefix := redistest.Client(t)
	s := must(redisstore.NewPortalStore(client, &redisstore.PortalStoreOptions{Prefix: prefix}))
	ctx := t.Context()
	expires := portalT0.Add(time.Hour + 123456789*time.Nanosecond)
	require.NoError(t, s.Put(ctx, portalKey("k"), portalSession(nil, expires), portalT0))
	got, err := s.Get(ctx, portalKey("k"), expires.Add(-time.Nanosecond))
	require.NoError(t, err)
	require.True(t, got.ExpiresAt.Equal(expires), "kept to the nanosecond: %v", got.ExpiresAt)
	_, err = s.Get(ctx, portalKey("k"), expires)
	require.ErrorIs(t, err, portal.ErrNotFound)
}

// A value that is not a session is an error, never ErrNotFound and never a session.
func TestPortalStoreCorruptValue(t *testing.T) {
	client, prefix := redistest.Client(t)
	s := must(redisstore.NewPortalStore(client, &redisstore.PortalStoreOptions{Prefix: prefix}))
	ctx := t.Context()
	k := portalKey("bad")
	for _, bad := range []string{"x", `{"licensee":`, `[]`} {
		require.NoError(t, client.Set(ctx, prefix+"portal:{"+k+"}", bad, time.Minute).Err())
		_, err := s.Get(ctx, k, portalT0)
		require.Error(t, err, bad)
		require.NotErrorIs(t, err, portal.ErrNotFound, bad)
		_, err = s.Take(ctx, k, portalT0)
		require.Error(t, err, bad)
		require.NotErrorIs(t, err, portal.ErrNotFound, bad)
	}
}

func TestNewPortalStoreRefuses(t *testing.T) {
	_, err := redisstore.NewPortalStore(nil, nil)
	require.Error(t, err)
	_, err = redisstore.NewPortalStore(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), &redisstore.PortalStoreOptions{Prefix: "a{b}:"})
	require.ErrorContains(t, err, "must not contain")
}

// Replicas race for one link: two clients (two processes), many Takes each; exactly one of them
// opens a session, round after round.
func TestPortalStoreReplicasRaceTake(t *testing.T) {
	a, prefix := redistest.Client(t)
	b := redis.NewClient(a.Options())
	t.Cleanup(func() { _ = b.Close() })
	replicas := []*redisstore.PortalStore{
		must(redisstore.NewPortalStore(a, &redisstore.PortalStoreOptions{Prefix: prefix})),
		must(redisstore.NewPortalStore(b, &redisstore.PortalStoreOptions{Prefix: prefix})),
	}
	ctx := t.Context()
	const rounds, perReplica = 20, 8
	for round := range rounds {
		key := portalKey(fmt.Sprint("race-", round))
		require.NoError(t, replicas[round%2].Put(ctx, key, portalSession([]string{}, portalT0.Add(time.Hour)), portalT0))
		var (
			wins  atomic.Int32
			wg    sync.WaitGroup
			start = make(chan struct{})
		)
		for _, s := range replicas {
			for range perReplica {
				wg.Go(func() {
					<-start
					_, err := s.Take(ctx, key, portalT0)
					switch {
					case err == nil:
						wins.Add(1)
					case !errors.Is(err, portal.ErrNotFound):
						t.Errorf("round %d: Take: %v", round, err)
					}
				})
			}
		}
		close(start)
		wg.Wait()
		require.Equal(t, int32(1), wins.Load(), "round %d: Takes that opened a session", round)
	}
}

// Redis unreachable (a proxy cuts every connection): every method fails at once with an error that
// is not ErrNotFound, and a Take that never reached Redis has not spent the link.
func TestPortalStoreOutage(t *testing.T) {
	direct, prefix := redistest.Client(t)
	proxy := faultproxy.Start(t, direct.Options().Addr)
	opts := *direct.Options()
	opts.Addr = proxy.Addr()
	opts.MaxRetries = -1
	client := redis.NewClient(&opts)
	t.Cleanup(func() { _ = client.Close() })
	s := must(redisstore.NewPortalStore(client, &redisstore.PortalStoreOptions{Prefix: prefix}))
	ctx := context.Background()
	key, sess := portalKey("link"), portalSession([]string{"webhook_endpoints:read"}, portalT0.Add(time.Hour))
	require.NoError(t, s.Put(ctx, key, sess, portalT0))

	proxy.Cut()
	_, err := s.Take(ctx, key, portalT0)
	require.Error(t, err)
	require.NotErrorIs(t, err, portal.ErrNotFound)
	_, err = s.Get(ctx, key, portalT0)
	require.Error(t, err)
	require.NotErrorIs(t, err, portal.ErrNotFound)
	require.Error(t, s.Put(ctx, portalKey("other"), sess, portalT0))
	require.Error(t, s.Delete(ctx, key))
	proxy.Restore()

	got, err := s.Take(ctx, key, portalT0)
	require.NoError(t, err, "back: the link was not spent by the Take that failed")
	require.Equal(t, sess.Permissions, got.Permissions)
	_, err = s.Take(ctx, key, portalT0)
	require.ErrorIs(t, err, portal.ErrNotFound)
}
