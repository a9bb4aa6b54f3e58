package redisstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/redisstore"
	"github.com/svcplatform/conventions/redisstore/internal/redistest"
)

// These tests start Redis servers of their own: the settings they need (eviction, a tiny maxmemory,
// CONFIG renamed) must never be given to the shared test server.

// idemKeyBase is the part of a record's Redis key before ":<key>" (see IdempotencyStore).
func idemKeyBase(prefix, scope string) string {
	sum := sha256.Sum256([]byte(scope))
	return prefix + "{" + base64.RawURLEncoding.EncodeToString(sum[:]) + "}:idem"
}

// fillUntil writes 16 KiB junk values ("junk:<i>") until done, which sees each write's error, reports
// true, and returns how many it wrote. A write error that done does not accept fails the test, as does
// a server that never gets there within a bound far above what 2 MiB holds.
func fillUntil(t *testing.T, c *redis.Client, done func(writeErr error) bool) int {
	t.Helper()
	ctx := context.Background()
	junk := strings.Repeat("x", 16<<10)
	for i := range 5000 {
		err := c.Set(ctx, "junk:"+strconv.Itoa(i), junk, 0).Err()
		if done(err) {
			return i + 1
		}
		require.NoError(t, err, "junk write %d", i)
	}
	t.Fatal("the server never reached the state the test waits for")
	return 0
}

// TestIdempotencyRefusesEviction: NewIdempotencyStore refuses a Redis that may evict records, naming
// the policy, the server and the fix; AllowEviction accepts it; and the last subtest shows the hazard
// the check exists for: the evicted completed record lets a retry claim its key again.
func TestIdempotencyRefusesEviction(t *testing.T) {
	srv := redistest.StartServer(t, "--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru", "--save", "", "--appendonly", "no")
	client := srv.Client(t)
	ctx := context.Background()

	t.Run("refused", func(t *testing.T) {
		s, err := redisstore.NewIdempotencyStore(ctx, client, nil)
		require.ErrorIs(t, err, redisstore.ErrEvictionPolicy)
		require.Nil(t, s)
		for _, want := range []string{"allkeys-lru", srv.Addr, "CONFIG SET maxmemory-policy noeviction", "IdempotencyStoreOptions.AllowEviction"} {
			require.ErrorContains(t, err, want)
		}
	})

	t.Run("every policy but noeviction", func(t *testing.T) {
		// A server of its own: the policy changes here must not race with the other subtests.
		srv := redistest.StartServer(t)
		c := srv.Client(t)
		for _, policy := range []string{"volatile-lru", "allkeys-lru", "volatile-lfu", "allkeys-lfu", "volatile-random", "allkeys-random", "volatile-ttl", "noeviction"} {
			t.Run(policy, func(t *testing.T) {
				require.NoError(t, c.ConfigSet(ctx, "maxmemory-policy", policy).Err())
				_, err := redisstore.NewIdempotencyStore(ctx, c, nil)
				if policy == "noeviction" {
					require.NoError(t, err)
					return
				}
				require.ErrorIs(t, err, redisstore.ErrEvictionPolicy)
				require.ErrorContains(t, err, "maxmemory-policy "+policy)
			})
		}
	})

	t.Run("allowed, and what it costs", func(t *testing.T) {
		s, err := redisstore.NewIdempotencyStore(ctx, client, &redisstore.IdempotencyStoreOptions{AllowEviction: true})
		require.NoError(t, err)
		k := driver.Key{Scope: "lic", Key: "pay-1"}
		c := idemClaim(t, s, k, idemFP1, idemT0)
		require.Equal(t, driver.Claimed, c.Status)
		resp := driver.Response{Status: 201, Body: []byte(`{"charged":true}`)}
		require.NoError(t, s.Complete(ctx, k, c.Token, resp, idemT0.Add(idemRetention)))
		require.Equal(t, driver.Completed, idemClaim(t, s, k, idemFP1, idemT0.Add(time.Second)).Status)

		// Memory runs out; Redis evicts what it likes. EXISTS does not touch a key's LRU clock.
		record := idemKeyBase(redisstore.DefaultIdempotencyPrefix, k.Scope) + ":" + k.Key
		fillUntil(t, client, func(err error) bool {
			require.NoError(t, err, "allkeys-lru makes room instead of failing")
			n, err := client.Exists(ctx, record).Result()
			require.NoError(t, err)
			return n == 0
		})
		info, err := client.Info(ctx, "stats").Result()
		require.NoError(t, err)
		require.NotContains(t, info, "evicted_keys:0\r")

		// The retry of the completed payment is not replayed: it claims the key, and its handler runs
		// a second time. This is what NewIdempotencyStore refuses to risk by default.
		again := idemClaim(t, s, k, idemFP1, idemT0.Add(2*time.Second))
		require.Equal(t, driver.Claimed, again.Status)
		require.Nil(t, again.Response)
	})
}

// TestIdempotencyConfigRefused: a Redis that does not allow CONFIG (managed services rename it) cannot
// be checked; the error says so and names the option, which then lets the store be built.
func TestIdempotencyConfigRefused(t *testing.T) {
	srv := redistest.StartServer(t, "--rename-command", "CONFIG", "")
	client := srv.Client(t)
	ctx := context.Background()
	_, err := redisstore.NewIdempotencyStore(ctx, client, nil)
	require.Error(t, err)
	require.NotErrorIs(t, err, redisstore.ErrEvictionPolicy, "the policy is unknown, not wrong")
	var rerr redis.Error
	require.ErrorAs(t, err, &rerr, "the server's refusal is kept")
	for _, want := range []string{"refused CONFIG GET maxmemory-policy", srv.Addr, "noeviction", "IdempotencyStoreOptions.AllowEviction"} {
		require.ErrorContains(t, err, want)
	}
	s, err := redisstore.NewIdempotencyStore(ctx, client, &redisstore.IdempotencyStoreOptions{AllowEviction: true})
	require.NoError(t, err)
	require.Equal(t, driver.Claimed, idemClaim(t, s, driver.Key{Scope: "lic", Key: "k"}, idemFP1, idemT0).Status)
}

// usedMemory is the server's used_memory (INFO memory).
func usedMemory(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("INFO memory has no used_memory")
	return 0
}

// TestIdempotencyOutOfMemory: under noeviction a full Redis refuses writes with OOM errors instead of
// dropping records. Completions and claims of new keys fail loudly and store nothing; completed
// records still replay; and once memory is back the owner, which kept its claim, completes.
//
// With and without a quota: the quota's bookkeeping must not be the script's first write, or Redis
// would let the script go on writing (it checks memory at the first write only).
func TestIdempotencyOutOfMemory(t *testing.T) {
	for _, quota := range []int{0, 100} {
		t.Run("quota "+strconv.Itoa(quota), func(t *testing.T) { testOutOfMemory(t, quota) })
	}
}

func testOutOfMemory(t *testing.T, quota int) {
	srv := redistest.StartServer(t, "--maxmemory-policy", "noeviction")
	client := srv.Client(t)
	ctx := context.Background()
	s := mustIdemStore(t, client, &redisstore.IdempotencyStoreOptions{MaxRecordsPerScope: quota})
	done := driver.Key{Scope: "lic", Key: "done"}
	busy := driver.Key{Scope: "lic", Key: "busy"}
	lapsed := driver.Key{Scope: "lic", Key: "lapsed"}
	resp := driver.Response{Status: 201, Header: map[string][]string{"Location": {"/v1/orders/1"}}, Body: []byte(`{"id":1}`)}
	c := idemClaim(t, s, done, idemFP1, idemT0)
	require.NoError(t, s.Complete(ctx, done, c.Token, resp, idemT0.Add(idemRetention)))
	owner := idemClaim(t, s, busy, idemFP1, idemT0)
	lapsedOwner := idemClaim(t, s, lapsed, idemFP1, idemT0)

	// Redis judges memory before each command, counting the command's own arguments in its query
	// buffer, so a server filled just to its limit is out of memory for one big write and not for the
	// small one after it. A limit well below what the server already holds makes every write meet a
	// full Redis.
	used := usedMemory(t, client)
	require.NoError(t, client.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used/2, 10)).Err())
	require.True(t, redis.IsOOMError(client.Set(ctx, "probe", "x", 0).Err()), "the server is full")

	t.Run("complete fails and stores nothing", func(t *testing.T) {
		err := s.Complete(ctx, busy, owner.Token, resp, idemT0.Add(idemRetention))
		require.Error(t, err)
		require.True(t, redis.IsOOMError(err), "%v", err)
		require.NotErrorIs(t, err, driver.ErrLeaseLost, "the owner still holds its claim")
		require.True(t, strings.HasPrefix(err.Error(), "redisstore: "), err.Error())
		rec, err := s.Lookup(ctx, busy, idemT0)
		require.NoError(t, err)
		require.Equal(t, driver.InFlight, rec.Status)
		require.Equal(t, owner.Token, rec.Token)
		require.Nil(t, rec.Response)
	})
	t.Run("claim of a new key fails and claims nothing", func(t *testing.T) {
		k := driver.Key{Scope: "lic", Key: "new"}
		c, err := s.Claim(ctx, k, idemFP1, idemT0, idemT0.Add(idemLease), idemT0.Add(idemRetention))
		require.Error(t, err)
		require.True(t, redis.IsOOMError(err), "%v", err)
		require.NotEqual(t, driver.Claimed, c.Status)
		_, err = s.Lookup(ctx, k, idemT0)
		require.ErrorIs(t, err, driver.ErrNotFound)
	})
	t.Run("a lapsed lease is neither marked nor taken over", func(t *testing.T) {
		at := idemT0.Add(2 * idemLease)
		_, err := s.Claim(ctx, lapsed, idemFP1, at, at.Add(idemLease), at.Add(idemRetention))
		require.True(t, redis.IsOOMError(err), "%v", err)
		rec, err := s.Lookup(ctx, lapsed, at)
		require.NoError(t, err)
		require.Equal(t, lapsedOwner.Token, rec.Token)
		require.True(t, rec.LeaseUntil.Equal(idemT0.Add(idemLease)))
	})
	t.Run("completed records still replay", func(t *testing.T) {
		got := idemClaim(t, s, done, idemFP1, idemT0.Add(time.Minute))
		require.Equal(t, driver.Completed, got.Status)
		require.Equal(t, resp, *got.Response)
		// And in-flight ones still answer in flight.
		require.Equal(t, driver.InFlight, idemClaim(t, s, busy, idemFP1, idemT0.Add(time.Second)).Status)
	})
	t.Run("the completion lands once memory is back", func(t *testing.T) {
		// The middleware keeps retrying a completion the store refused; here the retry is direct.
		require.NoError(t, client.ConfigSet(ctx, "maxmemory", strconv.FormatInt(2*used, 10)).Err())
		require.NoError(t, s.Complete(ctx, busy, owner.Token, resp, idemT0.Add(idemRetention)))
		got := idemClaim(t, s, busy, idemFP1, idemT0.Add(time.Minute))
		require.Equal(t, driver.Completed, got.Status)
		require.Equal(t, resp, *got.Response)
	})
}
