package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The read cache of CredentialStore and PinStore (CacheSize): rows that Get read, kept in memory and
// dropped when the row changes anywhere. Each store's table has a trigger (migration 2) that sends
// the changed row's key on a channel of the table's own with pg_notify, in the transaction that
// changes it, so the notification is delivered when that transaction commits and never when it
// rolls back. Listen holds a connection of its own that LISTENs on the channel and drops what it
// is told.
//
// The guarantee — a change committed at T is served by no replica at T + cacheWindow or later —
// rests on one rule: the cache serves only while its listener has proved, within the last
// cacheWindow, that nothing was missed. A round trip on the listening connection proves it for
// every change committed before the round trip began: the committing backend signals the listening
// one before its client sees the commit, and PostgreSQL sends a backend's pending notifications
// before the ReadyForQuery that ends a command, which pgx hands to OnNotification before the command
// returns. So the listener pings every cachePingInterval and, when a ping started at s comes back,
// lets the cache serve until s + cacheWindow. A listener that is disconnected, reconnecting, stalled
// (a half-open TCP connection) or starved of CPU stops extending the window, and the cache then
// reads through to the table, which is always right. On every new connection the cache is emptied
// once LISTEN is confirmed, since notifications may have been missed in between, and reads that
// began before cannot fill it (the generation below).
//
// Only rows that exist are cached. An unknown key is read from the table every time, so keys that
// an attacker makes up can never take a place in the cache (nor evict a real one), and the cache
// holds at most CacheSize rows that the table really has.

const (
	// cacheWindow is how long a confirmed round trip of the listener lets the cache serve: the bound
	// on staleness.
	cacheWindow = time.Second
	// cachePingInterval is how often the listener proves its connection when no notification
	// arrives; at most a quarter of cacheWindow, so that a ping late by a few hundred milliseconds on
	// a busy machine does not interrupt serving.
	cachePingInterval = 250 * time.Millisecond
	// cacheRoundTripTimeout bounds LISTEN and each ping: past it the connection is dropped and made
	// again. By then the window has lapsed and the cache reads through.
	cacheRoundTripTimeout = cacheWindow
	// cacheConnectTimeout bounds one connection attempt of the listener.
	cacheConnectTimeout = 10 * time.Second
	// cacheMinBackoff and cacheMaxBackoff pace the reconnections after a failed attempt.
	cacheMinBackoff = 100 * time.Millisecond
	cacheMaxBackoff = 5 * time.Second
)

// noTicket is the ticket of a read the cache will not take: it was not serving when the read began.
const noTicket = ^uint64(0)

// cacheChannel is the channel a store's trigger notifies on: the store's kind and 64 bits of a
// SHA-256 of its schema and table as configured, so it fits PostgreSQL's 63-byte limit whatever the
// names. Two tables whose unqualified names resolve in different schemas share a channel; each then
// also drops the other's keys, which costs a read and nothing else.
func cacheChannel(store, schema, table string) string {
	sum := sha256.Sum256([]byte(schema + "\x00" + table))
	return "pgstore_" + store + "_" + hex.EncodeToString(sum[:8])
}

// cacheHooks are the tests' view of a listener (export_test.go). They are set before Listen runs.
type cacheHooks struct {
	dial        func(cfg *pgx.ConnConfig) // before each connection attempt; may change cfg or block
	connected   func(pid uint32)          // LISTEN confirmed, the cache emptied and serving
	lost        func(err error)           // the connection ended; the cache stopped serving
	invalidated func(payload string)      // a notification was applied
}

// cache is a bounded LRU of rows keyed by K, with the listener that keeps it true. It is safe for
// concurrent use.
type cache[K comparable, V any] struct {
	size    int
	channel string
	// parse turns a notification's payload into the key to drop; false drops everything (the
	// payload of a TRUNCATE, or one this version cannot read).
	parse func(payload string) (K, bool)
	now   func() time.Time
	hooks cacheHooks

	listening atomic.Bool // a Listen is running

	mu      sync.Mutex
	entries map[K]*cacheEntry[K, V]
	lru     cacheEntry[K, V] // sentinel of the recency list: lru.next is the newest
	// gen changes with every drop: a read that began under another generation may have read a row
	// that was dropped meanwhile, and does not fill.
	gen   uint64
	until time.Time // the cache serves while now is before it; zero: it does not
}

type cacheEntry[K comparable, V any] struct {
	key        K
	val        V
	prev, next *cacheEntry[K, V]
}

func newCache[K comparable, V any](size int, channel string, parse func(string) (K, bool)) *cache[K, V] {
	c := &cache[K, V]{size: size, channel: channel, parse: parse, now: time.Now, entries: make(map[K]*cacheEntry[K, V])}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

// get returns the cached row of k when the cache serves and has it. Otherwise it returns the ticket
// that fill needs: the generation, or noTicket when the cache does not serve.
func (c *cache[K, V]) get(k K) (v V, ok bool, ticket uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.serving() {
		return v, false, noTicket
	}
	e := c.entries[k]
	if e == nil {
		return v, false, c.gen
	}
	c.unlink(e)
	c.pushFront(e)
	return e.val, true, 0
}

// fill caches v, read under ticket, unless something was dropped since the ticket was taken or the
// cache stopped serving. A full cache evicts its least recently used row.
func (c *cache[K, V]) fill(k K, v V, ticket uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ticket != c.gen || !c.serving() {
		return
	}
	if e := c.entries[k]; e != nil {
		e.val = v
		c.unlink(e)
		c.pushFront(e)
		return
	}
	var e *cacheEntry[K, V]
	if len(c.entries) >= c.size {
		e = c.lru.prev // the oldest, reused
		c.unlink(e)
		delete(c.entries, e.key)
	} else {
		e = new(cacheEntry[K, V])
	}
	e.key, e.val = k, v
	c.entries[k] = e
	c.pushFront(e)
}

// serving reports whether the listener's last proof is recent enough. c.mu is held.
func (c *cache[K, V]) serving() bool { return c.now().Before(c.until) }

func (c *cache[K, V]) unlink(e *cacheEntry[K, V]) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (c *cache[K, V]) pushFront(e *cacheEntry[K, V]) {
	e.prev, e.next = &c.lru, c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}

// drop forgets k.
func (c *cache[K, V]) drop(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if e := c.entries[k]; e != nil {
		c.unlink(e)
		delete(c.entries, k)
	}
}

// dropIf forgets every row for which match is true.
func (c *cache[K, V]) dropIf(match func(V) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for k, e := range c.entries {
		if match(e.val) {
			c.unlink(e)
			delete(c.entries, k)
		}
	}
}

// clearLocked forgets everything. c.mu is held.
func (c *cache[K, V]) clearLocked() {
	c.gen++
	clear(c.entries)
	c.lru.next, c.lru.prev = &c.lru, &c.lru
}

// invalidate applies a notification's payload.
func (c *cache[K, V]) invalidate(payload string) {
	if k, ok := c.parse(payload); ok {
		c.drop(k)
	} else {
		c.mu.Lock()
		c.clearLocked()
		c.mu.Unlock()
	}
	if c.hooks.invalidated != nil {
		c.hooks.invalidated(payload)
	}
}

// start empties the cache and lets it serve on the proof of a round trip that began at s (LISTEN's).
func (c *cache[K, V]) start(s time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clearLocked()
	c.until = s.Add(cacheWindow)
}

// confirm extends serving on the proof of a round trip that began at s.
func (c *cache[K, V]) confirm(s time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if u := s.Add(cacheWindow); u.After(c.until) {
		c.until = u
	}
}

// stop ends serving and empties the cache: the listener is gone.
func (c *cache[K, V]) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.until = time.Time{}
	c.clearLocked()
}

// len returns how many rows the cache holds.
func (c *cache[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// listen runs the listener on connections made like pool's until ctx ends, reconnecting after every
// failure; it returns nil then. what names the store in errors and logs.
func (c *cache[K, V]) listen(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger, what string) error {
	if !c.listening.CompareAndSwap(false, true) {
		return fmt.Errorf("pgstore: %s.Listen is already running", what)
	}
	defer c.listening.Store(false)
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	base := pool.Config().ConnConfig
	backoff := cacheMinBackoff
	for {
		confirmed, err := c.session(ctx, base)
		c.stop()
		if c.hooks.lost != nil {
			c.hooks.lost(err)
		}
		if ctx.Err() != nil {
			return nil
		}
		wait := backoff
		if confirmed {
			// It worked until now: try again at once, then back off if that fails.
			wait, backoff = 0, cacheMinBackoff
		} else {
			backoff = min(2*backoff, cacheMaxBackoff)
		}
		logger.WarnContext(ctx, "pgstore: the cache's listening connection failed; Get reads the table until it is back",
			slog.String("store", what), slog.String("channel", c.channel), slog.Duration("retry_in", wait), slog.Any("error", err))
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
	}
}

// session makes one listening connection and keeps the cache serving on it until it fails or ctx
// ends. confirmed reports whether LISTEN took effect.
func (c *cache[K, V]) session(ctx context.Context, base *pgx.ConnConfig) (confirmed bool, err error) {
	cfg := base.Copy()
	// The pings would otherwise show in the pool's traces four times a second.
	cfg.Tracer = nil
	cfg.OnNotification = func(_ *pgconn.PgConn, n *pgconn.Notification) {
		if n.Channel == c.channel {
			c.invalidate(n.Payload)
		}
	}
	if c.hooks.dial != nil {
		c.hooks.dial(cfg)
	}
	cctx, cancel := context.WithTimeout(ctx, cacheConnectTimeout)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	cancel()
	if err != nil {
		return false, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(cctx)
		cancel()
	}()
	pc := conn.PgConn()
	s := c.now()
	if err := roundTrip(ctx, pc, "LISTEN "+quoteIdent(c.channel)); err != nil {
		return false, err
	}
	c.start(s)
	if c.hooks.connected != nil {
		c.hooks.connected(pc.PID())
	}
	next := time.Now().Add(cachePingInterval)
	for {
		if time.Now().Before(next) {
			wctx, cancel := context.WithDeadline(ctx, next)
			err := pc.WaitForNotification(wctx) // a notification goes to OnNotification
			cancel()
			switch {
			case ctx.Err() != nil:
				return true, nil
			case err != nil && !pgconn.Timeout(err):
				return true, err
			}
			continue
		}
		s := c.now()
		next = time.Now().Add(cachePingInterval)
		if err := roundTrip(ctx, pc, "-- ping"); err != nil {
			if ctx.Err() != nil {
				return true, nil
			}
			return true, err
		}
		c.confirm(s)
	}
}

// roundTrip sends sql on the simple protocol and waits for its end, or cacheRoundTripTimeout.
func roundTrip(ctx context.Context, pc *pgconn.PgConn, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, cacheRoundTripTimeout)
	defer cancel()
	_, err := pc.Exec(ctx, sql).ReadAll()
	return err
}

// cachePool returns the pool a cache listens like, or an error naming the constructor and the
// option when db is not a pool.
func cachePool(db DB, ctor, option string) (*pgxpool.Pool, error) {
	pool, ok := db.(*pgxpool.Pool)
	if !ok {
		return nil, fmt.Errorf("pgstore: %s: %s needs a *pgxpool.Pool (the cache listens on a connection of its own, made like the pool's), not a %T", ctor, option, db)
	}
	return pool, nil
}

// errNoCache is Listen on a store built without a cache.
func errNoCache(what, option string) error {
	return fmt.Errorf("pgstore: %s.Listen: the store has no cache (%s is 0)", what, option)
}
