package storetest

import (
	"context"
	"crypto/sha256"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/internal/check"
)

// ExactConfig describes a backend to RunExact. The zero value is not usable: RunExact fails the test
// when Resolution is not positive.
type ExactConfig struct {
	// Resolution is the finest time step the backend keeps: a lease that ends one Resolution after
	// now is still live. PostgreSQL keeps microseconds, Redis (as redisstore encodes times)
	// nanoseconds.
	Resolution time.Duration
}

var (
	exactT0  = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	exactFP1 = driver.Fingerprint(sha256.Sum256([]byte("POST /v1/orders {1}")))
	exactFP2 = driver.Fingerprint(sha256.Sum256([]byte("POST /v1/orders {2}")))
)

const (
	exactLease     = 30 * time.Second
	exactRetention = 24 * time.Hour
)

func exactClaim(t *testing.T, s driver.Store, k driver.Key, fp driver.Fingerprint, now time.Time) driver.Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), k, fp, now, now.Add(exactLease), now.Add(exactRetention))
	check.NoError(t, err)
	return c
}

// RunExact checks the Store contract at the backend's full time resolution, with fixed instants,
// keys and fingerprints, and exact comparisons where Run allows a millisecond: claims, replays that
// keep nil and empty headers and bodies distinct, fingerprint mismatches, take-over and fencing with
// increasing tokens, renewal, release, retention and scopes. Its keys are fixed (scope
// "lic_1:sandbox"), so s must not have been used for them before: give it a fresh schema or key
// prefix. Each case runs as a subtest.
func RunExact(t *testing.T, s driver.Store, cfg ExactConfig) {
	t.Helper()
	if cfg.Resolution <= 0 {
		t.Fatalf("storetest: ExactConfig.Resolution is %v, want a positive duration", cfg.Resolution)
	}
	unit := cfg.Resolution.String()
	switch cfg.Resolution {
	case time.Nanosecond:
		unit = "nanosecond"
	case time.Microsecond:
		unit = "microsecond"
	case time.Millisecond:
		unit = "millisecond"
	}
	ctx := context.Background()
	resp := driver.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}, "Location": {"/v1/orders/1"}}, Body: []byte(`{"id":"ord_1"}`)}
	cases := []struct {
		name string
		run  func(t *testing.T, s driver.Store, k driver.Key)
	}{
		{"claim then in flight", func(t *testing.T, s driver.Store, k driver.Key) {
			c := exactClaim(t, s, k, exactFP1, exactT0)
			check.Equal(t, driver.Claimed, c.Status)
			check.NotEqual(t, 0, c.Token)
			again := exactClaim(t, s, k, exactFP1, exactT0.Add(time.Second))
			check.Equal(t, driver.InFlight, again.Status)
			check.Instant(t, exactT0.Add(exactLease), again.LeaseUntil, "the in-flight claim's LeaseUntil")
			check.Equal(t, 0, again.Token)
		}},
		{"complete then replay exactly", func(t *testing.T, s driver.Store, k driver.Key) {
			c := exactClaim(t, s, k, exactFP1, exactT0)
			check.NoError(t, s.Complete(ctx, k, c.Token, resp, exactT0.Add(exactRetention)))
			r := exactClaim(t, s, k, exactFP1, exactT0.Add(time.Hour))
			check.Equal(t, driver.Completed, r.Status)
			check.Equal(t, resp, *r.Response)
			check.Equal(t, exactFP1, r.Fingerprint)
		}},
		{"nil and empty stay distinct", func(t *testing.T, s driver.Store, k driver.Key) {
			c := exactClaim(t, s, k, exactFP1, exactT0)
			check.NoError(t, s.Complete(ctx, k, c.Token, driver.Response{Status: 204}, exactT0.Add(exactRetention)))
			r := exactClaim(t, s, k, exactFP1, exactT0)
			check.Equal(t, nil, r.Response.Header)
			check.Equal(t, nil, r.Response.Body)
			k2 := driver.Key{Scope: k.Scope, Key: k.Key + "-2"}
			c = exactClaim(t, s, k2, exactFP1, exactT0)
			check.NoError(t, s.Complete(ctx, k2, c.Token, driver.Response{Status: 200, Header: http.Header{}, Body: []byte{}}, exactT0.Add(exactRetention)))
			r = exactClaim(t, s, k2, exactFP1, exactT0)
			check.NotEqual(t, nil, r.Response.Header)
			check.NotEqual(t, nil, r.Response.Body)
			check.Len(t, r.Response.Body, 0)
		}},
		{"other fingerprint changes nothing", func(t *testing.T, s driver.Store, k driver.Key) {
			c := exactClaim(t, s, k, exactFP1, exactT0)
			// Even past the lease a different request may not take the key over.
			m := exactClaim(t, s, k, exactFP2, exactT0.Add(time.Hour))
			check.Equal(t, exactFP1, m.Fingerprint)
			check.Equal(t, driver.InFlight, m.Status)
			check.NoError(t, s.Complete(ctx, k, c.Token, resp, exactT0.Add(exactRetention)))
			m = exactClaim(t, s, k, exactFP2, exactT0.Add(time.Hour))
			check.Equal(t, exactFP1, m.Fingerprint)
			check.Equal(t, driver.Completed, m.Status)
			rec, err := s.Lookup(ctx, k, exactT0.Add(time.Hour))
			check.NoError(t, err)
			check.Equal(t, exactFP1, rec.Fingerprint)
		}},
		{"ended lease is taken over and the stale owner fenced", func(t *testing.T, s driver.Store, k driver.Key) {
			old := exactClaim(t, s, k, exactFP1, exactT0)
			at := exactT0.Add(exactLease) // lease_until <= now: ended, so this claim marks it
			mark := exactClaim(t, s, k, exactFP1, at)
			check.Equal(t, driver.InFlight, mark.Status)
			check.Instant(t, at.Add(exactLease), mark.LeaseUntil, "LeaseUntil after the mark: one extra lease")
			at = at.Add(exactLease) // the extra lease ended too: this claim takes over
			nu := exactClaim(t, s, k, exactFP1, at)
			check.Equal(t, driver.Claimed, nu.Status)
			check.True(t, nu.Token > old.Token, "the take-over's token %d is not greater than the stale owner's %d", nu.Token, old.Token)
			check.ErrorIs(t, s.Complete(ctx, k, old.Token, resp, at.Add(exactRetention)), driver.ErrLeaseLost)
			check.ErrorIs(t, s.Renew(ctx, k, old.Token, at.Add(time.Hour)), driver.ErrLeaseLost)
			check.ErrorIs(t, s.Release(ctx, k, old.Token), driver.ErrLeaseLost)
			check.NoError(t, s.Complete(ctx, k, nu.Token, resp, at.Add(exactRetention)))
		}},
		{"lease one " + unit + " short is still live", func(t *testing.T, s driver.Store, k driver.Key) {
			exactClaim(t, s, k, exactFP1, exactT0)
			c := exactClaim(t, s, k, exactFP1, exactT0.Add(exactLease-cfg.Resolution))
			check.Equal(t, driver.InFlight, c.Status)
		}},
		{"renew keeps the key", func(t *testing.T, s driver.Store, k driver.Key) {
			c := exactClaim(t, s, k, exactFP1, exactT0)
			check.NoError(t, s.Renew(ctx, k, c.Token, exactT0.Add(2*exactLease)))
			again := exactClaim(t, s, k, exactFP1, exactT0.Add(exactLease+time.Second))
			check.Equal(t, driver.InFlight, again.Status)
			check.Instant(t, exactT0.Add(2*exactLease), again.LeaseUntil, "LeaseUntil after Renew")
		}},
		{"release frees the key and never reuses a token", func(t *testing.T, s driver.Store, k driver.Key) {
			c := exactClaim(t, s, k, exactFP1, exactT0)
			check.ErrorIs(t, s.Release(ctx, k, c.Token+1000), driver.ErrLeaseLost)
			check.NoError(t, s.Release(ctx, k, c.Token))
			_, err := s.Lookup(ctx, k, exactT0)
			check.ErrorIs(t, err, driver.ErrNotFound)
			n := exactClaim(t, s, k, exactFP2, exactT0)
			check.Equal(t, driver.Claimed, n.Status)
			check.NotEqual(t, c.Token, n.Token)
			check.ErrorIs(t, s.Complete(ctx, k, c.Token, resp, exactT0.Add(exactRetention)), driver.ErrLeaseLost)
		}},
		{"completed cannot be released or completed twice", func(t *testing.T, s driver.Store, k driver.Key) {
			c := exactClaim(t, s, k, exactFP1, exactT0)
			check.NoError(t, s.Complete(ctx, k, c.Token, resp, exactT0.Add(exactRetention)))
			check.ErrorIs(t, s.Complete(ctx, k, c.Token, resp, exactT0.Add(exactRetention)), driver.ErrLeaseLost)
			check.ErrorIs(t, s.Release(ctx, k, c.Token), driver.ErrLeaseLost)
			check.ErrorIs(t, s.Renew(ctx, k, c.Token, exactT0.Add(time.Hour)), driver.ErrLeaseLost)
		}},
		{"retention over frees the key for any request", func(t *testing.T, s driver.Store, k driver.Key) {
			c := exactClaim(t, s, k, exactFP1, exactT0)
			check.NoError(t, s.Complete(ctx, k, c.Token, resp, exactT0.Add(time.Hour)))
			_, err := s.Lookup(ctx, k, exactT0.Add(time.Hour))
			check.ErrorIs(t, err, driver.ErrNotFound)
			n := exactClaim(t, s, k, exactFP2, exactT0.Add(time.Hour))
			check.Equal(t, driver.Claimed, n.Status)
			check.True(t, n.Token > c.Token, "the new claim's token %d is not greater than the expired record's %d", n.Token, c.Token)
		}},
		{"lookup reports in flight and completed", func(t *testing.T, s driver.Store, k driver.Key) {
			_, err := s.Lookup(ctx, k, exactT0)
			check.ErrorIs(t, err, driver.ErrNotFound)
			c := exactClaim(t, s, k, exactFP1, exactT0)
			rec, err := s.Lookup(ctx, k, exactT0)
			check.NoError(t, err)
			check.Equal(t, driver.InFlight, rec.Status)
			check.Equal(t, c.Token, rec.Token)
			check.Instant(t, exactT0.Add(exactLease), rec.LeaseUntil, "Record.LeaseUntil")
			check.Instant(t, exactT0.Add(exactRetention), rec.ExpiresAt, "Record.ExpiresAt of the claim")
			check.NoError(t, s.Complete(ctx, k, c.Token, resp, exactT0.Add(2*exactRetention)))
			rec, err = s.Lookup(ctx, k, exactT0.Add(exactRetention))
			check.NoError(t, err)
			check.Equal(t, driver.Completed, rec.Status)
			check.Equal(t, resp, *rec.Response)
			check.Instant(t, exactT0.Add(2*exactRetention), rec.ExpiresAt, "Record.ExpiresAt set by Complete")
		}},
		{"scopes never share a record", func(t *testing.T, s driver.Store, k driver.Key) {
			c := exactClaim(t, s, k, exactFP1, exactT0)
			check.NoError(t, s.Complete(ctx, k, c.Token, resp, exactT0.Add(exactRetention)))
			other := driver.Key{Scope: k.Scope + "x", Key: k.Key}
			o := exactClaim(t, s, other, exactFP1, exactT0)
			check.Equal(t, driver.Claimed, o.Status)
			_, err := s.Lookup(ctx, driver.Key{Scope: "", Key: k.Key}, exactT0)
			check.ErrorIs(t, err, driver.ErrNotFound)
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, s, driver.Key{Scope: "lic_1:sandbox", Key: "key-" + string(rune('a'+i))})
		})
	}
}

// RunRacingClaims races claims on fresh keys and on keys whose lease and extra lease ended (odd rounds, a
// take-over): exactly one of 24 wins each round, the others see the key in flight. It uses fixed keys
// under the scope "lic_race", so s must not have been used for it before (a fresh schema or key
// prefix). On PostgreSQL the take-over race is the one where a claim's snapshot can be older than the
// row it locks, so it exercises Claim's re-read.
func RunRacingClaims(t *testing.T, s driver.Store) {
	t.Helper()
	ctx := context.Background()
	for round := range 10 {
		k := driver.Key{Scope: "lic_race", Key: "k" + string(rune('a'+round))}
		now := exactT0
		if round%2 == 1 {
			exactClaim(t, s, k, exactFP1, exactT0)
			check.Equal(t, driver.InFlight, exactClaim(t, s, k, exactFP1, exactT0.Add(exactLease)).Status)
			now = exactT0.Add(2 * exactLease)
		}
		var claimed, inFlight atomic.Int32
		var wg sync.WaitGroup
		for range 24 {
			wg.Go(func() {
				c, err := s.Claim(ctx, k, exactFP1, now, now.Add(exactLease), now.Add(exactRetention))
				if err != nil {
					t.Error(err)
					return
				}
				switch c.Status {
				case driver.Claimed:
					claimed.Add(1)
				case driver.InFlight:
					inFlight.Add(1)
				default:
					t.Errorf("unexpected status %v", c.Status)
				}
			})
		}
		wg.Wait()
		check.Equal(t, 1, claimed.Load())
		check.Equal(t, 23, inFlight.Load())
	}
}
