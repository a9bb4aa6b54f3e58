package memstore

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/internal/fields"
)

// Errors a Store returns besides the driver's.
var (
	// ErrStoreFull: the Store holds its maximum number of live records (Claim) or bytes of stored
	// responses (Complete). The middleware answers 503 (fail closed): evicting a live record instead
	// would let a retry run the handler a second time. Per-scope quotas (Options.MaxRecordsPerScope)
	// keep one scope from bringing the whole store there.
	ErrStoreFull = errors.New("idempotency: memory store is full")
	// ErrNotBuilt: a Store used without New. The methods of a zero Store return it.
	ErrNotBuilt = errors.New("idempotency: memstore.Store not built with memstore.New")
)

// Defaults of Options.
const (
	DefaultMaxRecords = 100_000
	DefaultMaxBytes   = 256 << 20
	DefaultShards     = 64
)

// smallResponse is the size under which Complete ignores the byte budget, so that a claim can always
// be finished with a short response (a problem, a placeholder); MaxRecords still bounds those.
const smallResponse = 2 << 10

// Options configures a Store. A nil *Options and the zero value mean the defaults.
type Options struct {
	// MaxRecords bounds the live records (in flight and completed) of the whole store, exactly: the
	// claim that would hold one more gets ErrStoreFull. Default DefaultMaxRecords.
	MaxRecords int
	// MaxRecordsPerScope bounds the live records of one scope (a credential: licensee and
	// environment), so that one tenant cannot fill the store that every tenant shares: a claim over
	// it gets driver.ErrQuotaExceeded (the middleware answers 429), and other scopes are untouched.
	// Default MaxRecords/10 (at least 1); a negative value turns the quota off.
	MaxRecordsPerScope int
	// MaxBytes bounds the bytes of stored responses (bodies, header names and values). Default
	// DefaultMaxBytes. Responses under 2 KiB are accepted even over the budget, so that a claim
	// can always be completed with a short answer; MaxRecords bounds those.
	MaxBytes int64
	// Shards is the number of independently locked partitions; it is rounded up to a power of two.
	// Default DefaultShards.
	Shards int
}

// Store is the in-process driver.Store: the default of the middleware (idempotency.Options.Store),
// and the right choice for a single replica, tests and examples. Records live in a map split into
// shards, each with its own lock, so that requests on different keys rarely contend. It is bounded
// (Options) and expires records itself, with no goroutine: each shard keeps its records in a queue in
// the order they were created, and every Claim drops a few expired records from the head of its
// shard's queue, so expiry costs O(1) per claim when retention is uniform (as it is under one
// middleware). Expired records are also dropped whenever Claim or Lookup meets them, and a full shard
// scans all its records before it refuses a claim.
//
// When full, Claim returns ErrStoreFull rather than evicting a live record: an evicted record would
// let a retry execute twice; a scope at its quota gets driver.ErrQuotaExceeded. Size MaxRecords for
// retention × rate of mutating requests: the default 100,000 records at the default 24 h retention
// hold about 1.1 requests per second, sustained. A record costs about 200 bytes of heap plus its key
// (the header's string, which the record keeps) and its response: TestRecordHeap measures 210 bytes
// per in-flight record, about 260 with a 36-byte key of its own.
//
// Responses returned by Claim and Lookup are shared with the store and must not be modified.
//
// A Store is safe for concurrent use. Its zero value is not usable: its Claim, Renew, Complete,
// Release and Lookup return ErrNotBuilt, and its Len is 0. Call New.
type Store struct {
	seed       maphash.Seed
	shards     []memShard
	mask       uint64
	maxRecords int64
	perScope   int // 0: no quota
	shardBytes int64
	tokens     atomic.Uint64
	records    atomic.Int64 // live records in every shard
	nextSweep  atomic.Int64 // earliest next full scan of every shard, Unix ns
	scopes     []scopeStripe
}

var (
	_ driver.Store     = (*Store)(nil)
	_ driver.Backender = (*Store)(nil)
)

// The middleware completes its claims on a Store from the header fields it captured.
func init() {
	fields.CompleteMemory = func(ctx context.Context, store any, key driver.Key, token uint64, status int, fs []fields.Field, body []byte, expiresAt time.Time) error {
		return store.(*Store).complete(ctx, key, token, status, fs, true, body, expiresAt)
	}
}

type memShard struct {
	mu sync.Mutex
	// records indexes records by the hash of their key; keys whose hashes collide chain through
	// memRecord.next. One hash serves both the shard choice and the lookup.
	records map[uint64]*memRecord
	store   *Store
	count   int
	bytes   int64
	queue   []*memRecord // expiry queue: queue[head:] in creation order
	head    int
	_       [64]byte // keeps neighbouring shards' locks off one cache line
}

// New returns an empty store; opts may be nil.
func New(opts *Options) *Store {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxRecords <= 0 {
		o.MaxRecords = DefaultMaxRecords
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Shards <= 0 {
		o.Shards = DefaultShards
	}
	switch {
	case o.MaxRecordsPerScope == 0:
		o.MaxRecordsPerScope = max(1, o.MaxRecords/10)
	case o.MaxRecordsPerScope < 0:
		o.MaxRecordsPerScope = 0
	}
	n := 1
	for n < o.Shards {
		n <<= 1
	}
	if n > o.MaxRecords {
		// Keep at least one record per shard; shrink the shard count instead.
		for n > 1 && n > o.MaxRecords {
			n >>= 1
		}
	}
	s := &Store{
		seed:       maphash.MakeSeed(),
		shards:     make([]memShard, n),
		mask:       uint64(n - 1),
		maxRecords: int64(o.MaxRecords),
		perScope:   o.MaxRecordsPerScope,
		shardBytes: o.MaxBytes / int64(n),
		scopes:     make([]scopeStripe, n),
	}
	if s.shardBytes < 1 {
		s.shardBytes = 1
	}
	for i := range s.shards {
		s.shards[i].records = make(map[uint64]*memRecord)
		s.shards[i].store = s
		s.scopes[i].counts = make(map[uint64]*scopeCount)
	}
	return s
}

func (s *Store) hash(key driver.Key) uint64 {
	var h maphash.Hash
	h.SetSeed(s.seed)
	_, _ = h.WriteString(key.Scope)
	_ = h.WriteByte(0)
	_, _ = h.WriteString(key.Key)
	return h.Sum64()
}

func (s *Store) shard(h uint64) *memShard { return &s.shards[h&s.mask] }

func (sh *memShard) find(key driver.Key, h uint64) *memRecord {
	for rec := sh.records[h]; rec != nil; rec = rec.next {
		if rec.key == key {
			return rec
		}
	}
	return nil
}

func (sh *memShard) insert(rec *memRecord) {
	rec.next = sh.records[rec.hash]
	sh.records[rec.hash] = rec
	rec.stored = true
	sh.count++
	sh.queue = append(sh.queue, rec)
}

// Claim implements driver.Store.
func (s *Store) Claim(ctx context.Context, key driver.Key, fp driver.Fingerprint, now, leaseUntil, expiresAt time.Time) (driver.Claim, error) {
	if s == nil || s.shards == nil {
		return driver.Claim{}, ErrNotBuilt
	}
	if err := ctx.Err(); err != nil {
		return driver.Claim{}, err
	}
	h := s.hash(key)
	sh := s.shard(h)
	nowNs := now.UnixNano()
	for swept := false; ; swept = true {
		c, err := s.claim(sh, key, h, fp, nowNs, leaseUntil, expiresAt)
		if err == nil || swept || !s.sweepAll(nowNs) {
			return c, err
		}
		// Full, or the scope at its quota: expired records the queues have not reached yet may be
		// what fills it. The sweep dropped them; decide again (the key's record may have changed).
	}
}

// claim is one attempt of Claim, under the shard's lock.
func (s *Store) claim(sh *memShard, key driver.Key, h uint64, fp driver.Fingerprint, nowNs int64, leaseUntil, expiresAt time.Time) (driver.Claim, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if rec := sh.live(key, h, nowNs); rec != nil {
		switch {
		case rec.fp != fp:
			return driver.Claim{Status: rec.status, Fingerprint: rec.fp, LeaseUntil: unixTime(rec.leaseUntil)}, nil
		case rec.status == driver.Completed:
			return driver.Claim{Status: driver.Completed, Fingerprint: rec.fp, LeaseUntil: unixTime(rec.leaseUntil), Response: rec.response()}, nil
		case rec.leaseUntil > nowNs:
			return driver.Claim{Status: driver.InFlight, Fingerprint: rec.fp, LeaseUntil: unixTime(rec.leaseUntil)}, nil
		case !rec.suspect:
			// The lease lapsed, but the owner may only have been cut off from the store: one more
			// lease for it to renew or complete before anyone takes over.
			rec.suspect = true
			rec.leaseUntil = leaseUntil.UnixNano()
			return driver.Claim{Status: driver.InFlight, Fingerprint: rec.fp, LeaseUntil: leaseUntil}, nil
		}
		// The owner let the extra lease pass too: take the key over under a new token, which fences
		// the old one.
		rec.token = s.tokens.Add(1)
		rec.suspect = false
		rec.leaseUntil = leaseUntil.UnixNano()
		rec.setExpiry(expiresAt.UnixNano())
		return driver.Claim{Status: driver.Claimed, Token: rec.token, Fingerprint: fp, LeaseUntil: leaseUntil}, nil
	}
	sh.expire(nowNs)
	if queued := len(sh.queue) - sh.head; queued >= compactAt && queued >= 2*sh.count {
		// Records that left early (released, or met expired by Claim or Lookup) stay queued behind a
		// live head until the queue reaches them; compact before they outnumber the shard's records.
		// After a sweep the queue holds only live records, so this costs O(1) per claim, amortized,
		// and bounds the queue at twice the shard's records.
		sh.sweep(nowNs)
	}
	quota, err := s.reserve(key.Scope)
	if err != nil {
		return driver.Claim{}, err
	}
	rec := &memRecord{key: key, hash: h, quota: quota, fp: fp, status: driver.InFlight, token: s.tokens.Add(1),
		leaseUntil: leaseUntil.UnixNano(), expiresAt: expiresAt.UnixNano()}
	sh.insert(rec)
	return driver.Claim{Status: driver.Claimed, Token: rec.token, Fingerprint: fp, LeaseUntil: leaseUntil}, nil
}

// owned returns the in-flight record that token owns, or nil.
func (sh *memShard) owned(key driver.Key, h uint64, token uint64) *memRecord {
	rec := sh.find(key, h)
	if rec == nil || rec.status != driver.InFlight || rec.token != token {
		return nil
	}
	return rec
}

// Renew implements driver.Store.
func (s *Store) Renew(ctx context.Context, key driver.Key, token uint64, leaseUntil time.Time) error {
	if s == nil || s.shards == nil {
		return ErrNotBuilt
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	h := s.hash(key)
	sh := s.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	rec := sh.owned(key, h, token)
	if rec == nil {
		return driver.ErrLeaseLost
	}
	rec.leaseUntil = leaseUntil.UnixNano()
	rec.suspect = false
	return nil
}

// Complete implements driver.Store. It copies resp: the caller may reuse its buffers at once.
func (s *Store) Complete(ctx context.Context, key driver.Key, token uint64, resp driver.Response, expiresAt time.Time) error {
	var fs []fields.Field
	if resp.Header != nil {
		fs = make([]fields.Field, 0, len(resp.Header))
		for k, vs := range resp.Header {
			fs = append(fs, fields.Field{Name: k, Vals: vs})
		}
	}
	return s.complete(ctx, key, token, resp.Status, fs, resp.Header != nil, resp.Body, expiresAt)
}

// complete is Complete on header fields: the middleware's path (fields.CompleteMemory), which never
// builds a header map for a response that may never be replayed.
func (s *Store) complete(ctx context.Context, key driver.Key, token uint64, status int, fs []fields.Field, hasHeader bool, body []byte, expiresAt time.Time) error {
	if s == nil || s.shards == nil {
		return ErrNotBuilt
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// The copy is made outside the lock: a large body copy must not stall the shard.
	if !hasHeader {
		fs = nil
	}
	blob, hdrLen := encodeResponse(fs, body)
	size := int64(len(blob))
	h := s.hash(key)
	sh := s.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	rec := sh.owned(key, h, token)
	if rec == nil {
		return driver.ErrLeaseLost
	}
	if size >= smallResponse && sh.bytes+size > s.shardBytes {
		return ErrStoreFull
	}
	rec.status = driver.Completed
	rec.code, rec.blob, rec.hdrLen, rec.hasHeader = status, blob, hdrLen, hasHeader
	rec.setExpiry(expiresAt.UnixNano())
	rec.size = size
	sh.bytes += size
	return nil
}

// Release implements driver.Store.
func (s *Store) Release(ctx context.Context, key driver.Key, token uint64) error {
	if s == nil || s.shards == nil {
		return ErrNotBuilt
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	h := s.hash(key)
	sh := s.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	rec := sh.owned(key, h, token)
	if rec == nil {
		return driver.ErrLeaseLost
	}
	sh.drop(rec)
	return nil
}

// Lookup implements driver.Store.
func (s *Store) Lookup(ctx context.Context, key driver.Key, now time.Time) (driver.Record, error) {
	if s == nil || s.shards == nil {
		return driver.Record{}, ErrNotBuilt
	}
	if err := ctx.Err(); err != nil {
		return driver.Record{}, err
	}
	h := s.hash(key)
	sh := s.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	rec := sh.live(key, h, now.UnixNano())
	if rec == nil {
		return driver.Record{}, driver.ErrNotFound
	}
	out := driver.Record{
		Fingerprint: rec.fp,
		Status:      rec.status,
		Token:       rec.token,
		LeaseUntil:  unixTime(rec.leaseUntil),
		ExpiresAt:   unixTime(rec.expiresAt),
	}
	if rec.status == driver.Completed {
		out.Response = rec.response()
	}
	return out, nil
}

// Len returns the number of records held, expired ones not yet dropped included.
func (s *Store) Len() int {
	if s == nil {
		return 0
	}
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.count
		sh.mu.Unlock()
	}
	return n
}

// Backend reports "memory", for the middleware's Hooks (driver.Backender).
func (s *Store) Backend() string { return "memory" }
