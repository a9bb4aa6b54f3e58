package redisstore_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/redisstore"
	"github.com/svcplatform/conventions/redisstore/internal/redistest"
)

// newIdemStore returns a store under the test's own key prefix.
func newIdemStore(t testing.TB) (*redisstore.IdempotencyStore, *redis.Client) {
	t.Helper()
	client, prefix := redistest.Client(t)
	return redisstore.NewIdempotencyStore(client, &redisstore.IdempotencyOptions{Prefix: prefix}), client
}

var (
	idemT0  = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	idemFP1 = idempotency.Fingerprint(sha256.Sum256([]byte("POST /v1/orders {1}")))
	idemFP2 = idempotency.Fingerprint(sha256.Sum256([]byte("POST /v1/orders {2}")))
)

const (
	idemLease     = 30 * time.Second
	idemRetention = 24 * time.Hour
)

func idemClaim(t *testing.T, s idempotency.Store, k idempotency.Key, fp idempotency.Fingerprint, now time.Time) idempotency.Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), k, fp, now, now.Add(idemLease), now.Add(idemRetention))
	require.NoError(t, err)
	return c
}

func TestIdempotencyStoreContract(t *testing.T) {
	ctx := context.Background()
	resp := idempotency.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}, "Location": {"/v1/orders/1"}}, Body: []byte(`{"id":"ord_1"}`)}
	cases := []struct {
		name string
		run  func(t *testing.T, s *redisstore.IdempotencyStore, k idempotency.Key)
	}{
		{"claim then in flight", func(t *testing.T, s *redisstore.IdempotencyStore, k idempotency.Key) {
			c := idemClaim(t, s, k, idemFP1, idemT0)
			require.Equal(t, idempotency.Claimed, c.Status)
			require.NotZero(t, c.Token)
			again := idemClaim(t, s, k, idemFP1, idemT0.Add(time.Second))
			require.Equal(t, idempotency.InFlight, again.Status)
			require.True(t, again.LeaseUntil.Equal(idemT0.Add(idemLease)))
			require.Zero(t, again.Token)
		}},
		{"complete then replay exactly", func(t *testing.T, s *redisstore.IdempotencyStore, k idempotency.Key) {
			c := idemClaim(t, s, k, idemFP1, idemT0)
			require.NoError(t, s.Complete(ctx, k, c.Token, resp, idemT0.Add(idemRetention)))
			r := idemClaim(t, s, k, idemFP1, idemT0.Add(time.Hour))
			require.Equal(t, idempotency.Completed, r.Status)
			require.Equal(t, resp, *r.Response)
			require.Equal(t, idemFP1, r.Fingerprint)
		}},
		{"nil and empty stay distinct", func(t *testing.T, s *redisstore.IdempotencyStore, k idempotency.Key) {
			c := idemClaim(t, s, k, idemFP1, idemT0)
			require.NoError(t, s.Complete(ctx, k, c.Token, idempotency.Response{Status: 204}, idemT0.Add(idemRetention)))
			r := idemClaim(t, s, k, idemFP1, idemT0)
			require.Nil(t, r.Response.Header)
			require.Nil(t, r.Response.Body)
			k2 := idempotency.Key{Scope: k.Scope, Key: k.Key + "-2"}
			c = idemClaim(t, s, k2, idemFP1, idemT0)
			require.NoError(t, s.Complete(ctx, k2, c.Token, idempotency.Response{Status: 200, Header: http.Header{}, Body: []byte{}}, idemT0.Add(idemRetention)))
			r = idemClaim(t, s, k2, idemFP1, idemT0)
			require.NotNil(t, r.Response.Header)
			require.NotNil(t, r.Response.Body)
			require.Empty(t, r.Response.Body)
		}},
		{"other fingerprint changes nothing", func(t *testing.T, s *redisstore.IdempotencyStore, k idempotency.Key) {
			c := idemClaim(t, s, k, idemFP1, idemT0)
			// Even past the lease a different request may not take the key over.
			m := idemClaim(t, s, k, idemFP2, idemT0.Add(time.Hour))
			require.Equal(t, idemFP1, m.Fingerprint)
			require.Equal(t, idempotency.InFlight, m.Status)
			require.NoError(t, s.Complete(ctx, k, c.Token, resp, idemT0.Add(idemRetention)))
			m = idemClaim(t, s, k, idemFP2, idemT0.Add(time.Hour))
			require.Equal(t, idemFP1, m.Fingerprint)
			require.Equal(t, idempotency.Completed, m.Status)
			rec, err := s.Lookup(ctx, k, idemT0.Add(time.Hour))
			require.NoError(t, err)
			require.Equal(t, idemFP1, rec.Fingerprint)
		}},
		{"ended lease is taken over and the stale owner fenced", func(t *testing.T, s *redisstore.IdempotencyStore, k idempotency.Key) {
			old := idemClaim(t, s, k, idemFP1, idemT0)
			at := idemT0.Add(idemLease) // lease_until <= now: ended
			nu := idemClaim(t, s, k, idemFP1, at)
			require.Equal(t, idempotency.Claimed, nu.Status)
			require.Greater(t, nu.Token, old.Token)
			require.ErrorIs(t, s.Complete(ctx, k, old.Token, resp, at.Add(idemRetention)), idempotency.ErrLeaseLost)
			require.ErrorIs(t, s.Renew(ctx, k, old.Token, at.Add(time.Hour)), idempotency.ErrLeaseLost)
			require.ErrorIs(t, s.Release(ctx, k, old.Token), idempotency.ErrLeaseLost)
			require.NoError(t, s.Complete(ctx, k, nu.Token, resp, at.Add(idemRetention)))
		}},
		{"lease one nanosecond short is still live", func(t *testing.T, s *redisstore.IdempotencyStore, k idempotency.Key) {
			idemClaim(t, s, k, idemFP1, idemT0)
			c := idemClaim(t, s, k, idemFP1, idemT0.Add(idemLease-time.Nanosecond))
			require.Equal(t, idempotency.InFlight, c.Status)
		}},
		{"renew keeps the key", func(t *testing.T, s *redisstore.IdempotencyStore, k idempotency.Key) {
			c := idemClaim(t, s, k, idemFP1, idemT0)
			require.NoError(t, s.Renew(ctx, k, c.Token, idemT0.Add(2*idemLease)))
			again := idemClaim(t, s, k, idemFP1, idemT0.Add(idemLease+time.Second))
			require.Equal(t, idempotency.InFlight, again.Status)
			require.True(t, again.LeaseUntil.Equal(idemT0.Add(2*idemLease)))
		}},
		{"release frees the key and never reuses a token", func(t *testing.T, s *redisstore.IdempotencyStore, k idempotency.Key) {
			c := idemClaim(t, s, k, idemFP1, idemT0)
			require.ErrorIs(t, s.Release(ctx, k, c.Token+1000), idempotency.ErrLeaseLost)
			require.NoError(t, s.Release(ctx, k, c.Token))
			_, err := s.Lookup(ctx, k, idemT0)
			require.ErrorIs(t, err, idempotency.ErrNotFound)
			n := idemClaim(t, s, k, idemFP2, idemT0)
			require.Equal(t, idempotency.Claimed, n.Status)
			require.NotEqual(t, c.Token, n.Token)
			require.ErrorIs(t, s.Complete(ctx, k, c.Token, resp, idemT0.Add(idemRetention)), idempotency.ErrLeaseLost)
		}},
		{"completed cannot be released or completed twice", func(t *testing.T, s *redisstore.IdempotencyStore, k idempotency.Key) {
			c := idemClaim(t, s, k, idemFP1, idemT0)
			require.NoError(t, s.Complete(ctx, k, c.Token, resp, idemT0.Add(idemRetention)))
			require.ErrorIs(t, s.Complete(ctx, k, c.Token, resp, idemT0.Add(idemRetention)), idempotency.ErrLeaseLost)
			require.ErrorIs(t, s.Release(ctx, k, c.Token), idempotency.ErrLeaseLost)
			require.ErrorIs(t, s.Renew(ctx, k, c.Token, idemT0.Add(time.Hour)), idempotency.ErrLeaseLost)
		}},
		{"retention over frees the key for any request", func(t *testing.T, s *redisstore.IdempotencyStore, k idempotency.Key) {
			c := idemClaim(t, s, k, idemFP1, idemT0)
			require.NoError(t, s.Complete(ctx, k, c.Token, resp, idemT0.Add(time.Hour)))
			_, err := s.Lookup(ctx, k, idemT0.Add(time.Hour))
			require.ErrorIs(t, err, idempotency.ErrNotFound)
			n := idemClaim(t, s, k, idemFP2, idemT0.Add(time.Hour))
			require.Equal(t, idempotency.Claimed, n.Status)
			require.Greater(t, n.Token, c.Token)
		}},
		{"lookup reports in flight and completed", func(t *testing.T, s *redisstore.IdempotencyStore, k idempotency.Key) {
			_, err := s.Lookup(ctx, k, idemT0)
			require.ErrorIs(t, err, idempotency.ErrNotFound)
			c := idemClaim(t, s, k, idemFP1, idemT0)
			rec, err := s.Lookup(ctx, k, idemT0)
			require.NoError(t, err)
			require.Equal(t, idempotency.InFlight, rec.Status)
			require.Equal(t, c.Token, rec.Token)
			require.True(t, rec.LeaseUntil.Equal(idemT0.Add(idemLease)))
			require.True(t, rec.ExpiresAt.Equal(idemT0.Add(idemRetention)))
			require.NoError(t, s.Complete(ctx, k, c.Token, resp, idemT0.Add(2*idemRetention)))
			rec, err = s.Lookup(ctx, k, idemT0.Add(idemRetention))
			require.NoError(t, err)
			require.Equal(t, idempotency.Completed, rec.Status)
			require.Equal(t, resp, *rec.Response)
			require.True(t, rec.ExpiresAt.Equal(idemT0.Add(2*idemRetention)))
		}},
		{"scopes never share a record", func(t *testing.T, s *redisstore.IdempotencyStore, k idempotency.Key) {
			c := idemClaim(t, s, k, idemFP1, idemT0)
			require.NoError(t, s.Complete(ctx, k, c.Token, resp, idemT0.Add(idemRetention)))
			other := idempotency.Key{Scope: k.Scope + "x", Key: k.Key}
			o := idemClaim(t, s, other, idemFP1, idemT0)
			require.Equal(t, idempotency.Claimed, o.Status)
			_, err := s.Lookup(ctx, idempotency.Key{Scope: "", Key: k.Key}, idemT0)
			require.ErrorIs(t, err, idempotency.ErrNotFound)
		}},
	}
	s, _ := newIdemStore(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, s, idempotency.Key{Scope: "lic_1:sandbox", Key: "key-" + string(rune('a'+i))})
		})
	}
}

// TestIdempotencyStoreRacingClaims races claims on fresh keys and on keys whose lease ended (odd
// rounds, a takeover): exactly one wins each round.
func TestIdempotencyStoreRacingClaims(t *testing.T) {
	s, _ := newIdemStore(t)
	ctx := context.Background()
	for round := range 10 {
		k := idempotency.Key{Scope: "lic_race", Key: "k" + string(rune('a'+round))}
		now := idemT0
		if round%2 == 1 {
			idemClaim(t, s, k, idemFP1, idemT0)
			now = idemT0.Add(idemLease)
		}
		var claimed, inFlight atomic.Int32
		var wg sync.WaitGroup
		for range 24 {
			wg.Go(func() {
				c, err := s.Claim(ctx, k, idemFP1, now, now.Add(idemLease), now.Add(idemRetention))
				if err != nil {
					t.Error(err)
					return
				}
				switch c.Status {
				case idempotency.Claimed:
					claimed.Add(1)
				case idempotency.InFlight:
					inFlight.Add(1)
				default:
					t.Errorf("unexpected status %v", c.Status)
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, 1, claimed.Load())
		require.EqualValues(t, 23, inFlight.Load())
	}
}
