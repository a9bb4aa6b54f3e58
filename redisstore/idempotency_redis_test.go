package redisstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/redisstore"
	"github.com/svcplatform/conventions/redisstore/internal/redistest"
)

// idemCounter counts the commands a client sends: each is one round trip.
type idemCounter struct{ n atomic.Int64 }

func (c *idemCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *idemCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *idemCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

func TestIdempotencyRoundTrips(t *testing.T) {
	client, prefix := redistest.Client(t)
	counter := &idemCounter{}
	client.AddHook(counter)
	s := mustIdemStore(t, client, &redisstore.IdempotencyStoreOptions{Prefix: prefix})
	ctx := context.Background()
	resp := driver.Response{Status: 201, Body: []byte(`{"id":"ord_1"}`)}
	// Warm the server's script cache: the very first call of a script may need EVAL after EVALSHA.
	warm := driver.Key{Scope: "lic", Key: "warm"}
	c := idemClaim(t, s, warm, idemFP1, idemT0)
	require.NoError(t, s.Renew(ctx, warm, c.Token, idemT0.Add(time.Minute)))
	require.NoError(t, s.Complete(ctx, warm, c.Token, resp, idemT0.Add(idemRetention)))
	c = idemClaim(t, s, driver.Key{Scope: "lic", Key: "warm2"}, idemFP1, idemT0)
	require.NoError(t, s.Release(ctx, driver.Key{Scope: "lic", Key: "warm2"}, c.Token))

	k := driver.Key{Scope: "lic", Key: "k"}
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"claim", func(t *testing.T) { c = idemClaim(t, s, k, idemFP1, idemT0) }},
		{"in flight", func(t *testing.T) {
			require.Equal(t, driver.InFlight, idemClaim(t, s, k, idemFP1, idemT0).Status)
		}},
		{"renew", func(t *testing.T) { require.NoError(t, s.Renew(ctx, k, c.Token, idemT0.Add(time.Minute))) }},
		{"complete", func(t *testing.T) { require.NoError(t, s.Complete(ctx, k, c.Token, resp, idemT0.Add(idemRetention))) }},
		{"replay", func(t *testing.T) {
			r := idemClaim(t, s, k, idemFP1, idemT0)
			require.Equal(t, driver.Completed, r.Status)
			require.Equal(t, resp.Body, r.Response.Body)
		}},
		{"lookup", func(t *testing.T) {
			_, err := s.Lookup(ctx, k, idemT0)
			require.NoError(t, err)
		}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before := counter.n.Load()
			st.run(t)
			require.EqualValues(t, 1, counter.n.Load()-before, "round trips")
		})
	}
}

func TestIdempotencyKeyLayout(t *testing.T) {
	client, prefix := redistest.Client(t)
	s := mustIdemStore(t, client, &redisstore.IdempotencyStoreOptions{Prefix: prefix})
	ctx := context.Background()
	cases := []struct{ name, scope, key string }{
		{"plain", "lic_1:live", "order-1"},
		{"braces in scope and key", "a}b{c", "{x}:idem:y"},
		{"empty scope", "", "k"},
		{"binary", "\x00\xff", "\x00"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := driver.Key{Scope: tc.scope, Key: tc.key}
			idemClaim(t, s, k, idemFP1, idemT0)
			sum := sha256.Sum256([]byte(tc.scope))
			tag := "{" + base64.RawURLEncoding.EncodeToString(sum[:]) + "}"
			record := prefix + tag + ":idem:" + tc.key
			seq := prefix + tag + ":idem-seq"
			for _, key := range []string{record, seq} {
				n, err := client.Exists(ctx, key).Result()
				require.NoError(t, err)
				require.EqualValues(t, 1, n, key)
				// Redis Cluster hashes the text between the first '{' and the next '}': the same for both.
				require.Equal(t, tag, key[strings.Index(key, "{"):strings.Index(key, "}")+1])
			}
		})
	}
}

func TestIdempotencyTTL(t *testing.T) {
	client, prefix := redistest.Client(t)
	s := mustIdemStore(t, client, &redisstore.IdempotencyStoreOptions{Prefix: prefix})
	ctx := context.Background()
	sum := sha256.Sum256([]byte("lic"))
	base := prefix + "{" + base64.RawURLEncoding.EncodeToString(sum[:]) + "}:idem"
	pttl := func(key string) time.Duration {
		d, err := client.PTTL(ctx, key).Result()
		require.NoError(t, err)
		return d
	}
	// A fake clock decades in the past: retention is measured from the caller's now, not the server's
	// clock, so the record still lives its full retention.
	past := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	k := driver.Key{Scope: "lic", Key: "k"}
	c, err := s.Claim(ctx, k, idemFP1, past, past.Add(idemLease), past.Add(time.Hour))
	require.NoError(t, err)
	require.InDelta(t, time.Hour, pttl(base+":k"), float64(5*time.Second))
	require.InDelta(t, time.Hour, pttl(base+"-seq"), float64(5*time.Second))
	// Completing with a longer retention extends both keys.
	require.NoError(t, s.Complete(ctx, k, c.Token, driver.Response{Status: 200}, past.Add(48*time.Hour)))
	require.InDelta(t, 48*time.Hour, pttl(base+":k"), float64(5*time.Second))
	require.InDelta(t, 48*time.Hour, pttl(base+"-seq"), float64(5*time.Second))
	// A shorter record later never shortens the counter: it must outlive every record of its scope.
	_, err = s.Claim(ctx, driver.Key{Scope: "lic", Key: "short"}, idemFP1, past, past.Add(idemLease), past.Add(time.Minute))
	require.NoError(t, err)
	require.InDelta(t, time.Minute, pttl(base+":short"), float64(5*time.Second))
	require.InDelta(t, 48*time.Hour, pttl(base+"-seq"), float64(5*time.Second))
	// Completing with a retention already over removes the record at once.
	c, err = s.Claim(ctx, driver.Key{Scope: "lic", Key: "gone"}, idemFP1, past, past.Add(idemLease), past.Add(time.Minute))
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, driver.Key{Scope: "lic", Key: "gone"}, c.Token, driver.Response{Status: 200}, past.Add(-time.Second)))
	n, err := client.Exists(ctx, base+":gone").Result()
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestIdempotencyTokensSurviveRecordDeletion: the token counter lives beside the records, so a key
// released (or expired and gone) and claimed again never hands out a token some earlier claim held.
func TestIdempotencyTokensSurviveRecordDeletion(t *testing.T) {
	s, client := newIdemStore(t)
	ctx := context.Background()
	k := driver.Key{Scope: "lic", Key: "k"}
	seen := map[uint64]bool{}
	last := uint64(0)
	for i := range 20 {
		now := idemT0.Add(time.Duration(i) * time.Hour)
		c := idemClaim(t, s, k, idemFP1, now)
		require.Equal(t, driver.Claimed, c.Status)
		require.False(t, seen[c.Token])
		require.Greater(t, c.Token, last)
		seen[c.Token], last = true, c.Token
		switch i % 3 {
		case 0:
			require.NoError(t, s.Release(ctx, k, c.Token))
		case 1:
			require.NoError(t, s.Complete(ctx, k, c.Token, driver.Response{Status: 200}, now.Add(time.Minute)))
		case 2: // abandoned in flight: a claim after its lease marks it, the next loop's takes it over
			require.Equal(t, driver.InFlight, idemClaim(t, s, k, idemFP1, now.Add(idemLease)).Status)
		}
	}
	require.NoError(t, client.Ping(ctx).Err())
}

func TestIdempotencyOutage(t *testing.T) {
	// Nothing listens on port 1: connections are refused. The shared server is never touched.
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second,
		DialerRetries: 1, DialerRetryTimeout: time.Microsecond})
	t.Cleanup(func() { _ = client.Close() })
	// Nothing answers to check the eviction policy of: the check is skipped so that the methods can be
	// shown to fail.
	s := mustIdemStore(t, client, &redisstore.IdempotencyStoreOptions{AllowEviction: true})
	ctx := context.Background()
	k := driver.Key{Scope: "lic", Key: "k"}
	ops := map[string]func() error{
		"claim": func() error {
			_, err := s.Claim(ctx, k, idemFP1, idemT0, idemT0.Add(idemLease), idemT0.Add(idemRetention))
			return err
		},
		"renew":    func() error { return s.Renew(ctx, k, 1, idemT0) },
		"complete": func() error { return s.Complete(ctx, k, 1, driver.Response{Status: 200}, idemT0) },
		"release":  func() error { return s.Release(ctx, k, 1) },
		"lookup": func() error {
			_, err := s.Lookup(ctx, k, idemT0)
			return err
		},
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			err := op()
			require.Error(t, err)
			require.NotErrorIs(t, err, driver.ErrLeaseLost)
			require.NotErrorIs(t, err, driver.ErrNotFound)
			var opErr *net.OpError
			require.ErrorAs(t, err, &opErr)
			require.True(t, strings.HasPrefix(err.Error(), "redisstore: "), err.Error())
		})
	}
}

func TestNewIdempotencyStoreOptions(t *testing.T) {
	live, _ := redistest.Client(t) // noeviction, as the test Redis must run
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second,
		DialerRetries: 1, DialerRetryTimeout: time.Microsecond})
	t.Cleanup(func() { _ = down.Close() })
	cases := []struct {
		name    string
		client  redis.UniversalClient
		opts    *redisstore.IdempotencyStoreOptions
		wantErr string // a substring of the error; "" for success
	}{
		{"defaults", live, nil, ""},
		{"zero options", live, &redisstore.IdempotencyStoreOptions{}, ""},
		{"prefix and quota", live, &redisstore.IdempotencyStoreOptions{Prefix: "app:", MaxRecordsPerScope: 10}, ""},
		{"open brace", live, &redisstore.IdempotencyStoreOptions{Prefix: "a{"}, "contains '{' or '}'"},
		{"close brace", live, &redisstore.IdempotencyStoreOptions{Prefix: "a}"}, "contains '{' or '}'"},
		{"negative quota", live, &redisstore.IdempotencyStoreOptions{MaxRecordsPerScope: -1}, "MaxRecordsPerScope"},
		{"nil client", nil, nil, "needs a client"},
		// The policy cannot be read from a server that does not answer: refused, not assumed.
		{"unreachable", down, nil, "reading maxmemory-policy from Redis<127.0.0.1:1"},
		{"unreachable, check skipped", down, &redisstore.IdempotencyStoreOptions{AllowEviction: true}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := redisstore.NewIdempotencyStore(context.Background(), tc.client, tc.opts)
			if tc.wantErr == "" {
				require.NoError(t, err)
				require.NotNil(t, s)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
			require.True(t, strings.HasPrefix(err.Error(), "redisstore: "), err.Error())
			require.Nil(t, s)
		})
	}
}

// FuzzIdempotencyKeys: whatever bytes a scope and key hold, the record lands under its own Redis key:
// a claim is found again, and neighbours that a naive concatenation would merge stay free.
func FuzzIdempotencyKeys(f *testing.F) {
	f.Add("lic_1:live", "order-1")
	f.Add("a:b", "c")
	f.Add("a", "b:c")
	f.Add("}{", "{}")
	f.Add("", "")
	f.Add("\x00\xff", ":idem:")
	client, prefix := redistest.Client(f)
	s := mustIdemStore(f, client, &redisstore.IdempotencyStoreOptions{Prefix: prefix})
	ctx := context.Background()
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, scope, key string) {
		// Fresh per input: the fuzzer repeats inputs, and one fuzz run sees thousands.
		scope = fmt.Sprint(n.Add(1), "/", scope)
		k := driver.Key{Scope: scope, Key: key}
		fp := driver.Fingerprint(sha256.Sum256([]byte(scope + "\x00" + key)))
		c, err := s.Claim(ctx, k, fp, idemT0, idemT0.Add(idemLease), idemT0.Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, driver.Claimed, c.Status)
		rec, err := s.Lookup(ctx, k, idemT0)
		require.NoError(t, err)
		require.Equal(t, fp, rec.Fingerprint)
		require.Equal(t, c.Token, rec.Token)
		for _, other := range []driver.Key{{Scope: scope + ":", Key: key}, {Scope: scope, Key: ":" + key}, {Scope: scope + key, Key: ""}} {
			if other == k {
				continue
			}
			_, err := s.Lookup(ctx, other, idemT0)
			require.ErrorIs(t, err, driver.ErrNotFound, "%q collides with %q", other, k)
		}
		require.NoError(t, s.Release(ctx, k, c.Token))
	})
}
