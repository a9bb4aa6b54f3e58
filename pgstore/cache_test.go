package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/apikey/credentialtest"
	"github.com/svcplatform/conventions/internal/testkit/faultproxy"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
	"github.com/svcplatform/conventions/versioning"
	"github.com/svcplatform/conventions/versioning/pintest"
)

// The caches of CredentialStore and PinStore, on the real server: replicas are stores on pools of
// their own over the same tables, each with its listener running.

// cacheWatch records what a store's listener does, for a test to wait on. The listener never blocks
// on it: an event that finds its channel full is dropped (the channels are far larger than any test
// needs).
type cacheWatch struct {
	connected   chan uint32
	lost        chan error
	invalidated chan string
	hold        atomic.Pointer[chan struct{}] // when set, connection attempts wait until it is closed
	dial        atomic.Pointer[func(*pgx.ConnConfig)]
	pid         atomic.Uint32 // the backend of the newest listening connection
}

func newCacheWatch() *cacheWatch {
	return &cacheWatch{connected: make(chan uint32, 64), lost: make(chan error, 64), invalidated: make(chan string, 1<<14)}
}

func (w *cacheWatch) hooks() pgstore.CacheHooks {
	send := func(ch chan string, v string) {
		select {
		case ch <- v:
		default:
		}
	}
	return pgstore.CacheHooks{
		Dial: func(cfg *pgx.ConnConfig) {
			if hold := w.hold.Load(); hold != nil {
				<-*hold
			}
			if f := w.dial.Load(); f != nil {
				(*f)(cfg)
			}
		},
		Connected: func(pid uint32) {
			w.pid.Store(pid)
			select {
			case w.connected <- pid:
			default:
			}
		},
		Lost: func(err error) {
			select {
			case w.lost <- err:
			default:
			}
		},
		Invalidated: func(p string) { send(w.invalidated, p) },
	}
}

// waitConnected waits for the listener to confirm LISTEN and returns its backend's pid.
func (w *cacheWatch) waitConnected(t *testing.T) uint32 {
	t.Helper()
	select {
	case pid := <-w.connected:
		return pid
	case <-time.After(patience(t)):
		t.Fatal("the cache's listener never connected")
		return 0
	}
}

// waitLost waits for the listener to report its connection gone.
func (w *cacheWatch) waitLost(t *testing.T) {
	t.Helper()
	select {
	case <-w.lost:
	case <-time.After(patience(t)):
		t.Fatal("the cache's listener never noticed that its connection was gone")
	}
}

// waitInvalidated waits until payload was applied, up to deadline; it reports whether it was.
func (w *cacheWatch) waitInvalidated(payload string, deadline time.Time) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		select {
		case p := <-w.invalidated:
			if p == payload {
				return true
			}
		case <-timer.C:
			return false
		}
	}
}

// runListen runs listen until the test ends, and fails the test if it returns an error.
func runListen(t *testing.T, listen func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- listen(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Listen: %v", err)
		}
	})
}

// credReplica is a replica's CredentialStore with a cache of size, listening and serving.
func credReplica(t *testing.T, pool *pgxpool.Pool, schema string, size int) (*pgstore.CredentialStore, *cacheWatch) {
	t.Helper()
	s := must(pgstore.NewCredentialStore(pool, &pgstore.CredentialStoreOptions{Schema: schema, CacheSize: size}))
	w := newCacheWatch()
	pgstore.SetCredentialCacheHooks(s, w.hooks())
	runListen(t, func(ctx context.Context) error { return s.Listen(ctx, nil) })
	w.waitConnected(t)
	return s, w
}

// pinReplica is a replica's PinStore with a cache of size, listening and serving.
func pinReplica(t *testing.T, pool *pgxpool.Pool, schema string, size int) (*pgstore.PinStore, *cacheWatch) {
	t.Helper()
	s := must(pgstore.NewPinStore(pool, &pgstore.PinStoreOptions{Schema: schema, CacheSize: size}))
	w := newCacheWatch()
	pgstore.SetPinCacheHooks(s, w.hooks())
	runListen(t, func(ctx context.Context) error { return s.Listen(ctx, nil) })
	w.waitConnected(t)
	return s, w
}

func hashPayload(h apikey.KeyHash) string { return hex.EncodeToString(h[:]) }

// requireWithinASecond waits for w to apply payload — the notification of a change that committed
// before committed returned — and then requires check to see the change. Up to one second after the
// commit the replica may answer from its cache; from then on it must not, whether the notification
// came or not (its listener then stopped proving that it missed nothing, and the cache reads the
// table). The notification itself must come too, later at worst: it is what makes a change take
// effect in milliseconds rather than at the window's end.
func requireWithinASecond(t *testing.T, w *cacheWatch, payload string, committed time.Time, check func() bool) {
	t.Helper()
	deadline := committed.Add(time.Second)
	notified := w.waitInvalidated(payload, deadline)
	require.True(t, check(), "a change committed %v ago is still served (notified: %v)", time.Since(committed), notified)
	if !notified {
		require.True(t, w.waitInvalidated(payload, time.Now().Add(patience(t))), "the change's notification never came")
	}
	t.Logf("%s: applied %v after the commit returned (notified in time: %v)", payload, time.Since(committed), notified)
}

func TestCredentialCacheConformance(t *testing.T) {
	credentialtest.Run(t, func(t *testing.T) apikey.CredentialStore {
		pool, schema := pgtest.Pool(t)
		require.NoError(t, pgstore.Migrate(context.Background(), pool, &pgstore.CredentialStoreOptions{Schema: schema}))
		s, _ := credReplica(t, pool, schema, 100)
		return s
	})
}

func TestPinCacheConformance(t *testing.T) {
	pool, schema := pgtest.Pool(t)
	require.NoError(t, pgstore.Migrate(context.Background(), pool, &pgstore.PinStoreOptions{Schema: schema}))
	s, _ := pinReplica(t, pool, schema, 100)
	pintest.Run(t, func(t *testing.T) versioning.PinStore { return s })
}

// TestCredentialCacheReplicas: two replicas, each a store with a cache on a pool of its own. A key
// that B authenticated from its cache is refused by B within one second of A's revocation, and the
// same for a revocation of every key of a licensee, for changes typed by hand in SQL and for a
// deleted row. An expiry needs no notification: the cached credential carries it.
func TestCredentialCacheReplicas(t *testing.T) {
	ctx := context.Background()
	poolA, schema := pgtest.Pool(t)
	opts := &pgstore.CredentialStoreOptions{Schema: schema}
	require.NoError(t, pgstore.Migrate(ctx, poolA, opts))
	a, _ := credReplica(t, poolA, schema, 100)
	b, wb := credReplica(t, replicaPool(t), schema, 100)

	clock := pgtest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	issA := must(apikey.NewIssuer(a, &apikey.IssuerOptions{Now: clock.Now, SandboxTTL: time.Hour}))
	issB := must(apikey.NewIssuer(b, &apikey.IssuerOptions{Now: clock.Now}))
	admin := replicaPool(t)
	table := pgx.Identifier{schema, pgstore.DefaultCredentialTable}.Sanitize()

	// issue returns a key that B has authenticated, and so caches.
	issue := func(t *testing.T, licensee string) (apikey.Credentials, apikey.Key) {
		t.Helper()
		creds, err := issA.Issue(ctx, apikey.Evaluation{Licensee: licensee})
		require.NoError(t, err)
		key, err := apikey.Parse(creds.APIKey)
		require.NoError(t, err)
		// The new row's own notification first: it would keep B's read from filling the cache.
		require.True(t, wb.waitInvalidated(hashPayload(key.Hash()), time.Now().Add(patience(t))))
		n := pgstore.CredentialCacheLen(b)
		_, err = issB.Resolve(ctx, key)
		require.NoError(t, err)
		require.Equal(t, n+1, pgstore.CredentialCacheLen(b), "B cached the credential")
		_, err = issB.Resolve(ctx, key)
		require.NoError(t, err)
		return creds, key
	}
	refused := func(key apikey.Key, want error) func() bool {
		return func() bool {
			_, err := issB.Resolve(ctx, key)
			return errors.Is(err, want)
		}
	}

	t.Run("revoke", func(t *testing.T) {
		creds, key := issue(t, "lic_revoke")
		require.NoError(t, issA.Revoke(ctx, creds.KeyID))
		requireWithinASecond(t, wb, hashPayload(key.Hash()), time.Now(), refused(key, apikey.ErrRevoked))
	})
	t.Run("revoke all", func(t *testing.T) {
		_, k1 := issue(t, "lic_all")
		_, k2 := issue(t, "lic_all")
		n, err := issA.EndEvaluation(ctx, "lic_all")
		require.NoError(t, err)
		require.Equal(t, 2, n)
		committed := time.Now()
		requireWithinASecond(t, wb, hashPayload(k1.Hash()), committed, refused(k1, apikey.ErrRevoked))
		requireWithinASecond(t, wb, hashPayload(k2.Hash()), committed, refused(k2, apikey.ErrRevoked))
	})
	t.Run("revoked by hand", func(t *testing.T) {
		creds, key := issue(t, "lic_hand")
		_, err := admin.Exec(ctx, `UPDATE `+table+` SET revoked_at = $2 WHERE id = $1`, creds.KeyID, clock.Now())
		require.NoError(t, err)
		requireWithinASecond(t, wb, hashPayload(key.Hash()), time.Now(), refused(key, apikey.ErrRevoked))
	})
	t.Run("deleted by hand", func(t *testing.T) {
		creds, key := issue(t, "lic_deleted")
		_, err := admin.Exec(ctx, `DELETE FROM `+table+` WHERE id = $1`, creds.KeyID)
		require.NoError(t, err)
		requireWithinASecond(t, wb, hashPayload(key.Hash()), time.Now(), refused(key, apikey.ErrUnknown))
	})
	t.Run("a rolled-back revocation changes nothing", func(t *testing.T) {
		creds, key := issue(t, "lic_rollback")
		tx, err := admin.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `UPDATE `+table+` SET revoked_at = $2 WHERE id = $1`, creds.KeyID, clock.Now())
		require.NoError(t, err)
		require.NoError(t, tx.Rollback(ctx))
		// A later change of another row is delivered after anything the rollback could have sent.
		other, _ := issue(t, "lic_rollback_marker")
		require.NoError(t, issA.Revoke(ctx, other.KeyID))
		otherKey, err := apikey.Parse(other.APIKey)
		require.NoError(t, err)
		require.True(t, wb.waitInvalidated(hashPayload(otherKey.Hash()), time.Now().Add(patience(t))))
		n := pgstore.CredentialCacheLen(b)
		_, err = issB.Resolve(ctx, key)
		require.NoError(t, err)
		require.Equal(t, n, pgstore.CredentialCacheLen(b), "still cached: nothing was dropped")
	})
	t.Run("expiry needs no notification", func(t *testing.T) {
		_, key := issue(t, "lic_expiry")
		n := pgstore.CredentialCacheLen(b)
		clock.Advance(time.Hour)
		_, err := issB.Resolve(ctx, key)
		require.ErrorIs(t, err, apikey.ErrExpired)
		require.Equal(t, n, pgstore.CredentialCacheLen(b), "refused from the cache")
		clock.Advance(-time.Hour)
	})
}

// TestPinCacheReplicas: a pin that replica B routes by from its cache follows A's change within one
// second: a re-pin, a deletion, an UPDATE typed by hand, a TRUNCATE.
func TestPinCacheReplicas(t *testing.T) {
	ctx := context.Background()
	poolA, schema := pgtest.Pool(t)
	require.NoError(t, pgstore.Migrate(ctx, poolA, &pgstore.PinStoreOptions{Schema: schema}))
	a, _ := pinReplica(t, poolA, schema, 100)
	b, wb := pinReplica(t, replicaPool(t), schema, 100)
	admin := replicaPool(t)
	table := pgx.Identifier{schema, pgstore.DefaultPinTable}.Sanitize()

	pin := func(t *testing.T, licensee string) {
		t.Helper()
		_, created, err := a.SetIfAbsent(ctx, licensee, "v1", pinT0)
		require.NoError(t, err)
		require.True(t, created)
		// The new row's own notification first: it would keep B's read from filling the cache.
		require.True(t, wb.waitInvalidated(licensee, time.Now().Add(patience(t))))
		n := pgstore.PinCacheLen(b)
		p, err := b.Get(ctx, licensee)
		require.NoError(t, err)
		require.Equal(t, "v1", p.Version)
		require.Equal(t, n+1, pgstore.PinCacheLen(b), "B cached the pin")
	}
	version := func(licensee, want string) func() bool {
		return func() bool {
			p, err := b.Get(ctx, licensee)
			if want == "" {
				return errors.Is(err, versioning.ErrNotPinned)
			}
			return err == nil && p.Version == want
		}
	}

	t.Run("re-pinned", func(t *testing.T) {
		pin(t, "lic_swap")
		_, err := a.CompareAndSwap(ctx, "lic_swap", "v1", "v2", pinT0.Add(time.Hour))
		require.NoError(t, err)
		requireWithinASecond(t, wb, "lic_swap", time.Now(), version("lic_swap", "v2"))
		p, err := b.Get(ctx, "lic_swap")
		require.NoError(t, err)
		require.Equal(t, "v1", p.Previous, "the cache holds the pin's previous version too")
	})
	t.Run("deleted", func(t *testing.T) {
		pin(t, "lic_delete")
		require.NoError(t, a.Delete(ctx, "lic_delete"))
		requireWithinASecond(t, wb, "lic_delete", time.Now(), version("lic_delete", ""))
	})
	t.Run("changed by hand", func(t *testing.T) {
		pin(t, "lic_hand")
		_, err := admin.Exec(ctx, `UPDATE `+table+` SET version = 'v3' WHERE licensee = 'lic_hand'`)
		require.NoError(t, err)
		requireWithinASecond(t, wb, "lic_hand", time.Now(), version("lic_hand", "v3"))
	})
	t.Run("truncated", func(t *testing.T) {
		pin(t, "lic_truncate")
		_, err := admin.Exec(ctx, `TRUNCATE `+table)
		require.NoError(t, err)
		requireWithinASecond(t, wb, "", time.Now(), version("lic_truncate", ""))
		require.Zero(t, pgstore.PinCacheLen(b))
	})
}

// TestCacheListenerKilled: while the listening connection is gone, the cache serves nothing and
// caches nothing — Get reads the table, which may change meanwhile with nobody listening — and once
// the listener is back on a new connection, it serves again, from an empty cache.
func TestCacheListenerKilled(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	require.NoError(t, pgstore.Migrate(ctx, pool, &pgstore.PinStoreOptions{Schema: schema}))
	s, w := pinReplica(t, pool, schema, 100)
	admin := replicaPool(t)
	table := pgx.Identifier{schema, pgstore.DefaultPinTable}.Sanitize()

	_, _, err := s.SetIfAbsent(ctx, "lic_1", "v1", pinT0)
	require.NoError(t, err)
	require.True(t, w.waitInvalidated("lic_1", time.Now().Add(patience(t))))
	_, err = s.Get(ctx, "lic_1")
	require.NoError(t, err)
	require.Equal(t, 1, pgstore.PinCacheLen(s))

	// The listener's backend killed, as an administrator or a failover would; it may not reconnect
	// until the test says so.
	hold := make(chan struct{})
	w.hold.Store(&hold)
	pid := w.pid.Load()
	var killed bool
	require.NoError(t, admin.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, int32(pid)).Scan(&killed))
	require.True(t, killed)
	w.waitLost(t)
	require.Zero(t, pgstore.PinCacheLen(s), "emptied")

	// Nobody listens: a change now notifies no one. Get reads it, and caches nothing.
	_, err = admin.Exec(ctx, `UPDATE `+table+` SET version = 'v2' WHERE licensee = 'lic_1'`)
	require.NoError(t, err)
	for range 3 {
		p, err := s.Get(ctx, "lic_1")
		require.NoError(t, err)
		require.Equal(t, "v2", p.Version)
	}
	require.Zero(t, pgstore.PinCacheLen(s), "nothing is cached while nothing proves the cache true")

	close(hold)
	require.NotEqual(t, pid, w.waitConnected(t), "a new connection")
	p, err := s.Get(ctx, "lic_1")
	require.NoError(t, err)
	require.Equal(t, "v2", p.Version)
	require.Equal(t, 1, pgstore.PinCacheLen(s), "serving again")
	_, err = s.CompareAndSwap(ctx, "lic_1", "v2", "v3", pinT0)
	require.NoError(t, err)
	p, err = s.Get(ctx, "lic_1")
	require.NoError(t, err)
	require.Equal(t, "v3", p.Version, "a replica's own change is served at once")
}

// TestCacheListenerStalled: the listening connection neither fails nor answers (a partition, a
// half-open TCP connection): its notifications stop arriving, and so do the pings that prove it
// missed nothing. A revocation on another replica is still refused here from one second after its
// commit on, and once the network is back the listener reconnects and the cache serves again.
func TestCacheListenerStalled(t *testing.T) {
	ctx := context.Background()
	poolA, schema := pgtest.Pool(t)
	require.NoError(t, pgstore.Migrate(ctx, poolA, &pgstore.CredentialStoreOptions{Schema: schema}))
	a := must(pgstore.NewCredentialStore(poolA, &pgstore.CredentialStoreOptions{Schema: schema}))

	// B's own statements go straight to the server; its listener goes through the proxy.
	cfg := poolA.Config().ConnConfig
	proxy := faultproxy.Start(t, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	phost, pport := proxy.HostPort()
	b := must(pgstore.NewCredentialStore(replicaPool(t), &pgstore.CredentialStoreOptions{Schema: schema, CacheSize: 10}))
	w := newCacheWatch()
	viaProxy := func(c *pgx.ConnConfig) { c.Host, c.Port, c.Fallbacks = phost, pport, nil }
	w.dial.Store(&viaProxy)
	pgstore.SetCredentialCacheHooks(b, w.hooks())
	runListen(t, func(ctx context.Context) error { return b.Listen(ctx, nil) })
	w.waitConnected(t)

	c := credentialtest.Credential(1, "lic_stall", apikey.Sandbox)
	require.NoError(t, a.Put(ctx, c))
	require.True(t, w.waitInvalidated(hashPayload(c.Hash), time.Now().Add(patience(t))))
	_, err := b.Get(ctx, c.Hash)
	require.NoError(t, err)
	require.Equal(t, 1, pgstore.CredentialCacheLen(b))

	proxy.Stall()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	require.NoError(t, a.Revoke(ctx, c.ID, at))
	committed := time.Now()
	// Nothing arrives through the stalled connection: wait out the second, then B must read the table.
	require.False(t, w.waitInvalidated(hashPayload(c.Hash), committed.Add(time.Second)), "no notification crosses a stall")
	got, err := b.Get(ctx, c.Hash)
	require.NoError(t, err)
	require.Equal(t, at, got.RevokedAt, "one second after the commit the stale credential is no longer served")

	w.waitLost(t) // the ping's deadline ends the connection
	proxy.Resume()
	w.waitConnected(t)
	got, err = b.Get(ctx, c.Hash)
	require.NoError(t, err)
	require.Equal(t, at, got.RevokedAt)
	require.Equal(t, 1, pgstore.CredentialCacheLen(b), "serving again")
}

// TestCacheBoundAndHostileKeys: the cache never holds more than CacheSize credentials, however many
// distinct real keys are read, and keys nobody issued — a flood of made-up ones — take no place in
// it and evict nothing.
func TestCacheBoundAndHostileKeys(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	require.NoError(t, pgstore.Migrate(ctx, pool, &pgstore.CredentialStoreOptions{Schema: schema}))
	const size = 8
	s, w := credReplica(t, pool, schema, size)

	real := make([]apikey.Credential, 100)
	for i := range real {
		real[i] = credentialtest.Credential(i, "lic_bound", apikey.Sandbox)
		require.NoError(t, s.Put(ctx, real[i]))
	}
	// Notifications come in commit order: after the last insert's, none will drop a row read below.
	require.True(t, w.waitInvalidated(hashPayload(real[len(real)-1].Hash), time.Now().Add(patience(t))))
	for round := range 2 {
		for _, c := range real {
			got, err := s.Get(ctx, c.Hash)
			require.NoError(t, err)
			require.Equal(t, c.ID, got.ID)
			require.LessOrEqual(t, pgstore.CredentialCacheLen(s), size, "round %d", round)
		}
	}
	require.Equal(t, size, pgstore.CredentialCacheLen(s))

	// The last size keys read are the ones cached; a flood of unknown keys leaves them there.
	var flood sync.WaitGroup
	for range 4 {
		flood.Go(func() {
			for range 250 {
				var h apikey.KeyHash
				_, _ = rand.Read(h[:])
				if _, err := s.Get(ctx, h); !errors.Is(err, apikey.ErrCredentialNotFound) {
					t.Errorf("an unknown key: %v", err)
					return
				}
			}
		})
	}
	flood.Wait()
	require.Equal(t, size, pgstore.CredentialCacheLen(s))
	// Still cached: a hit does not read the table, so it answers even with the row gone behind
	// the cache's back (a DELETE with the trigger disabled, which no one should do).
	_, err := pool.Exec(ctx, `ALTER TABLE `+pgx.Identifier{schema, pgstore.DefaultCredentialTable}.Sanitize()+` DISABLE TRIGGER USER`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `DELETE FROM `+pgx.Identifier{schema, pgstore.DefaultCredentialTable}.Sanitize())
	require.NoError(t, err)
	for _, c := range real[len(real)-size:] {
		got, err := s.Get(ctx, c.Hash)
		require.NoError(t, err, "the flood evicted %s", c.ID)
		require.Equal(t, c.ID, got.ID)
	}
}

// TestCacheOptions: what a cache needs, and what Listen refuses.
func TestCacheOptions(t *testing.T) {
	ctx := context.Background()
	pool, schema := pgtest.Pool(t)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()

	_, err = pgstore.NewCredentialStore(pool, &pgstore.CredentialStoreOptions{CacheSize: -1})
	require.ErrorContains(t, err, "negative")
	_, err = pgstore.NewPinStore(pool, &pgstore.PinStoreOptions{CacheSize: -1})
	require.ErrorContains(t, err, "negative")
	_, err = pgstore.NewCredentialStore(tx, &pgstore.CredentialStoreOptions{CacheSize: 10})
	require.ErrorContains(t, err, "*pgxpool.Pool")
	_, err = pgstore.NewPinStore(tx, &pgstore.PinStoreOptions{CacheSize: 10})
	require.ErrorContains(t, err, "*pgxpool.Pool")

	require.ErrorContains(t, must(pgstore.NewCredentialStore(pool, nil)).Listen(ctx, nil), "no cache")
	require.ErrorContains(t, must(pgstore.NewPinStore(pool, nil)).Listen(ctx, nil), "no cache")

	require.NoError(t, pgstore.Migrate(ctx, pool, &pgstore.PinStoreOptions{Schema: schema}))
	s, _ := pinReplica(t, pool, schema, 10)
	require.ErrorContains(t, s.Listen(ctx, nil), "already running")
}
