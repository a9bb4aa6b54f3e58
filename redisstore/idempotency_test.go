package redisstore_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/storetest"
	"github.com/svcplatform/conventions/redisstore"
	"github.com/svcplatform/conventions/redisstore/internal/redistest"
)

// newIdemStore returns a store under the test's own key prefix.
func newIdemStore(t testing.TB) (*redisstore.IdempotencyStore, *redis.Client) {
	t.Helper()
	client, prefix := redistest.Client(t)
	return mustIdemStore(t, client, &redisstore.IdempotencyStoreOptions{Prefix: prefix}), client
}

// mustIdemStore builds a store on client and fails the test if the server is refused.
func mustIdemStore(t testing.TB, client redis.UniversalClient, opts *redisstore.IdempotencyStoreOptions) *redisstore.IdempotencyStore {
	t.Helper()
	s, err := redisstore.NewIdempotencyStore(context.Background(), client, opts)
	require.NoError(t, err)
	return s
}

var (
	idemT0  = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	idemFP1 = driver.Fingerprint(sha256.Sum256([]byte("POST /v1/orders {1}")))
	idemFP2 = driver.Fingerprint(sha256.Sum256([]byte("POST /v1/orders {2}")))
)

const (
	idemLease     = 30 * time.Second
	idemRetention = 24 * time.Hour
)

func idemClaim(t *testing.T, s driver.Store, k driver.Key, fp driver.Fingerprint, now time.Time) driver.Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), k, fp, now, now.Add(idemLease), now.Add(idemRetention))
	require.NoError(t, err)
	return c
}

// TestIdempotencyStoreContract checks the Store contract at the store's full time resolution (see
// storetest.RunExact) on a fresh key prefix.
func TestIdempotencyStoreContract(t *testing.T) {
	s, _ := newIdemStore(t)
	storetest.RunExact(t, s, storetest.ExactConfig{Resolution: time.Nanosecond})
}

// TestIdempotencyStoreRacingClaims races claims on fresh keys and on keys whose lease ended: exactly
// one wins each round (see storetest.RunRacingClaims).
func TestIdempotencyStoreRacingClaims(t *testing.T) {
	s, _ := newIdemStore(t)
	storetest.RunRacingClaims(t, s)
}
