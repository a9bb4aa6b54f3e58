package idempotency

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ErrStoreFull is returned by a MemoryStore that holds its maximum number of live records (Claim) or
// bytes of stored responses (Complete). The middleware answers 503 (fail closed): evicting a live
// record instead would let a retry run the handler a second time. Per-scope quotas
// (MemoryOptions.MaxRecordsPerScope) keep one scope from bringing the whole store there.
var ErrStoreFull = errors.New("idempotency: memory store is full")

// Defaults of MemoryOptions.
const (
	DefaultMemoryMaxRecords = 100_000
	DefaultMemoryMaxBytes   = 256 << 20
	DefaultMemoryShards     = 64
)

// smallResponse is the size under which Complete ignores the byte budget, so that a claim can always
// be finished with a short response (a problem, a placeholder); MaxRecords still bounds those.
const smallResponse = 2 << 10

// expireBatch bounds the expired records one Claim drops from the head of its shard's expiry queue, so
// that expiry costs every claim a little and none of them a lot.
const expireBatch = 4

// fullSweepEvery is how often (in the callers' time) a full store, or a scope at its quota, may scan
// every record for expired ones before refusing a claim; the scan is the fallback for records the
// expiry queues have not reached yet.
const fullSweepEvery = time.Second

// compactAt is the expiry-queue length below which a shard never compacts its queue.
const compactAt = 64

// MemoryOptions configures a MemoryStore. A nil *MemoryOptions and the zero value mean the defaults.
type MemoryOptions struct {
	// MaxRecords bounds the live records (in flight and completed) of the whole store, exactly: the
	// claim that would hold one more gets ErrStoreFull. Default DefaultMemoryMaxRecords.
	MaxRecords int
	// MaxRecordsPerScope bounds the live records of one scope (a credential: licensee and
	// environment), so that one tenant cannot fill the store that every tenant shares: a claim over
	// it gets ErrQuotaExceeded (the middleware answers 429), and other scopes are untouched. Default
	// MaxRecords/10 (at least 1); a negative value turns the quota off.
	MaxRecordsPerScope int
	// MaxBytes bounds the bytes of stored responses (bodies, header names and values). Default
	// DefaultMemoryMaxBytes. Responses under 2 KiB are accepted even over the budget, so that a claim
	// can always be completed with a short answer; MaxRecords bounds those.
	MaxBytes int64
	// Shards is the number of independently locked partitions; it is rounded up to a power of two.
	// Default DefaultMemoryShards.
	Shards int
}

// MemoryStore is the in-process Store: the default of the middleware, and the right choice for a
// single replica, tests and examples. Records live in a map split into shards, each with its own lock,
// so that requests on different keys rarely contend. It is bounded (MemoryOptions) and expires records
// itself, with no goroutine: each shard keeps its records in a queue in the order they were created,
// and every Claim drops a few expired records from the head of its shard's queue, so expiry costs O(1)
// per claim when retention is uniform (as it is under one middleware). Expired records are also
// dropped whenever Claim or Lookup meets them, and a full shard scans all its records before it
// refuses a claim.
//
// When full, Claim returns ErrStoreFull rather than evicting a live record: an evicted record would let
// a retry execute twice; a scope at its quota gets ErrQuotaExceeded. Size MaxRecords for retention ×
// rate of mutating requests: the default 100,000 records at the default 24 h retention hold about 1.1
// requests per second, sustained. A record costs about 200 bytes of heap plus its key (the header's
// string, which the record keeps) and its response: TestMemoryRecordHeap measures 210 bytes per
// in-flight record, about 260 with a 36-byte key of its own.
//
// Responses returned by Claim and Lookup are shared with the store and must not be modified.
//
// A MemoryStore is safe for concurrent use. Its zero value is not usable: its Claim, Renew,
// Complete, Release and Lookup return an error that wraps ErrNotBuilt, and its Len is 0. Call
// NewMemoryStore.
type MemoryStore struct {
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

// scopeStripe counts the records of the scopes that hash to it. Lock order: a shard's mu, then a
// stripe's; nothing takes them the other way round.
type scopeStripe struct {
	mu     sync.Mutex
	counts map[uint64]*scopeCount
	_      [48]byte // keeps neighbouring stripes' locks off one cache line
}

var _ Store = (*MemoryStore)(nil)

type memShard struct {
	mu sync.Mutex
	// records indexes records by the hash of their key; keys whose hashes collide chain through
	// memRecord.next. One hash serves both the shard choice and the lookup.
	records map[uint64]*memRecord
	store   *MemoryStore
	count   int
	bytes   int64
	queue   []*memRecord // expiry queue: queue[head:] in creation order
	head    int
	_       [64]byte // keeps neighbouring shards' locks off one cache line
}

// memRecord is one record. It is kept light for the garbage collector, which otherwise spends more
// on a large store than the store spends on its requests: times are Unix nanoseconds, and a stored
// response is one pointer-free blob (encoded header, then body) until it is first read.
type memRecord struct {
	key        Key
	hash       uint64
	next       *memRecord  // hash collision chain
	stored     bool        // in the shard's index (false once dropped)
	requeue    bool        // expiresAt moved later since the record was queued
	suspect    bool        // a claim found the lease lapsed and extended it once (see Store.Claim)
	quota      *scopeCount // the scope's count, when quotas are on
	hasHeader  bool        // the response had a (possibly empty) header
	status     Status
	fp         Fingerprint
	token      uint64
	leaseUntil int64  // Unix ns
	expiresAt  int64  // Unix ns
	code       int    // the response's status code
	blob       []byte // encoded header fields, then the body
	hdrLen     int    // length of the header part of blob
	resp       *Response
	size       int64
}

// response returns the stored response, decoding it on first use; it is never changed afterwards,
// so callers may share it. The shard's lock is held.
func (r *memRecord) response() *Response {
	if r.resp == nil {
		resp := &Response{Status: r.code}
		if r.hasHeader {
			resp.Header = decodeFields(r.blob[:r.hdrLen])
		}
		if len(r.blob) > r.hdrLen {
			resp.Body = r.blob[r.hdrLen:len(r.blob):len(r.blob)]
		}
		r.resp = resp
	}
	return r.resp
}

func (r *memRecord) setExpiry(ns int64) {
	if ns > r.expiresAt {
		r.requeue = true
	}
	r.expiresAt = ns
}

func unixTime(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// NewMemoryStore returns an empty store; opts may be nil.
func NewMemoryStore(opts *MemoryOptions) *MemoryStore {
	var o MemoryOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxRecords <= 0 {
		o.MaxRecords = DefaultMemoryMaxRecords
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMemoryMaxBytes
	}
	if o.Shards <= 0 {
		o.Shards = DefaultMemoryShards
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
	s := &MemoryStore{
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

func (s *MemoryStore) hash(key Key) uint64 {
	var h maphash.Hash
	h.SetSeed(s.seed)
	_, _ = h.WriteString(key.Scope)
	_ = h.WriteByte(0)
	_, _ = h.WriteString(key.Key)
	return h.Sum64()
}

func (s *MemoryStore) shard(h uint64) *memShard { return &s.shards[h&s.mask] }

func (sh *memShard) find(key Key, h uint64) *memRecord {
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

// live returns the record of key unless it has expired at now; an expired one is dropped.
func (sh *memShard) live(key Key, h uint64, now int64) *memRecord {
	rec := sh.find(key, h)
	if rec != nil && rec.expiresAt <= now {
		sh.drop(rec)
		return nil
	}
	return rec
}

func (sh *memShard) drop(rec *memRecord) {
	if !rec.stored {
		return
	}
	sh.store.forget(rec)
	first := sh.records[rec.hash]
	if first == rec {
		if rec.next == nil {
			delete(sh.records, rec.hash)
		} else {
			sh.records[rec.hash] = rec.next
		}
	} else {
		for p := first; p != nil; p = p.next {
			if p.next == rec {
				p.next = rec.next
				break
			}
		}
	}
	rec.next, rec.stored = nil, false
	sh.count--
	sh.bytes -= rec.size
}

// expire drops up to expireBatch expired records from the head of the queue. A record whose retention
// was extended (by Complete or a take-over) goes to the back of the queue instead; one already
// dropped (released, or met expired by Claim or Lookup) is skipped.
func (sh *memShard) expire(now int64) {
	for n := 0; n < expireBatch && sh.head < len(sh.queue); n++ {
		rec := sh.queue[sh.head]
		if rec.stored {
			if rec.expiresAt > now {
				if !rec.requeue {
					return // the head is live: so, roughly, is everything behind it
				}
				rec.requeue = false
				sh.queue = append(sh.queue, rec)
			} else {
				sh.drop(rec)
			}
		}
		sh.queue[sh.head] = nil
		sh.head++
	}
	// Reclaim the consumed front once it is at least half the slice.
	if sh.head > 32 && sh.head*2 >= len(sh.queue) {
		n := copy(sh.queue, sh.queue[sh.head:])
		clear(sh.queue[n:])
		sh.queue = sh.queue[:n]
		sh.head = 0
	}
}

// sweep scans every record of the shard for expired ones and rebuilds the queue from the survivors.
func (sh *memShard) sweep(now int64) {
	q := sh.queue[:0]
	for _, rec := range sh.queue[sh.head:] {
		if rec.stored && rec.expiresAt <= now {
			sh.drop(rec)
		}
		if rec.stored {
			q = append(q, rec)
		}
	}
	clear(sh.queue[len(q):])
	sh.queue, sh.head = q, 0
}

// sweepAll sweeps every shard, at most once per fullSweepEvery of the callers' time, and reports
// whether it ran. The caller holds no shard lock.
func (s *MemoryStore) sweepAll(now int64) bool {
	next := s.nextSweep.Load()
	if now < next || !s.nextSweep.CompareAndSwap(next, now+int64(fullSweepEvery)) {
		return false
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.sweep(now)
		sh.mu.Unlock()
	}
	return true
}

// scopeCount is the number of live records of one scope, guarded by its stripe's mu. Records point
// at theirs, so that a record leaving the store gives its place back without a lookup.
type scopeCount struct {
	n      int
	hash   uint64
	stripe *scopeStripe
}

// reserve takes a place for one more record of scope, in the scope's quota and in the store, and
// returns the scope's count (nil without quotas) for the record to keep.
func (s *MemoryStore) reserve(scope string) (*scopeCount, error) {
	var c *scopeCount
	if s.perScope > 0 {
		// Scopes are counted by their seeded 64-bit hash: two scopes would share a quota only if
		// their hashes collided, which nobody can arrange without the seed.
		h := maphash.String(s.seed, scope)
		st := &s.scopes[h&s.mask]
		st.mu.Lock()
		c = st.counts[h]
		if c == nil {
			c = &scopeCount{hash: h, stripe: st}
			st.counts[h] = c
		}
		if c.n >= s.perScope {
			st.mu.Unlock()
			return nil, ErrQuotaExceeded
		}
		c.n++
		st.mu.Unlock()
	}
	for {
		n := s.records.Load()
		if n >= s.maxRecords {
			c.release()
			return nil, ErrStoreFull
		}
		if s.records.CompareAndSwap(n, n+1) {
			return c, nil
		}
	}
}

// release gives back one place of the scope; a scope with no record left is forgotten.
func (c *scopeCount) release() {
	if c == nil {
		return
	}
	st := c.stripe
	st.mu.Lock()
	if c.n--; c.n <= 0 {
		delete(st.counts, c.hash)
	}
	st.mu.Unlock()
}

// forget gives back the places of a record that left the store.
func (s *MemoryStore) forget(rec *memRecord) {
	rec.quota.release()
	rec.quota = nil
	s.records.Add(-1)
}

// Claim implements Store.
func (s *MemoryStore) Claim(ctx context.Context, key Key, fp Fingerprint, now, leaseUntil, expiresAt time.Time) (Claim, error) {
	if s == nil || s.shards == nil {
		return Claim{}, errZeroMemoryStore
	}
	if err := ctx.Err(); err != nil {
		return Claim{}, err
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
func (s *MemoryStore) claim(sh *memShard, key Key, h uint64, fp Fingerprint, nowNs int64, leaseUntil, expiresAt time.Time) (Claim, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if rec := sh.live(key, h, nowNs); rec != nil {
		switch {
		case rec.fp != fp:
			return Claim{Status: rec.status, Fingerprint: rec.fp, LeaseUntil: unixTime(rec.leaseUntil)}, nil
		case rec.status == Completed:
			return Claim{Status: Completed, Fingerprint: rec.fp, LeaseUntil: unixTime(rec.leaseUntil), Response: rec.response()}, nil
		case rec.leaseUntil > nowNs:
			return Claim{Status: InFlight, Fingerprint: rec.fp, LeaseUntil: unixTime(rec.leaseUntil)}, nil
		case !rec.suspect:
			// The lease lapsed, but the owner may only have been cut off from the store: one more
			// lease for it to renew or complete before anyone takes over.
			rec.suspect = true
			rec.leaseUntil = leaseUntil.UnixNano()
			return Claim{Status: InFlight, Fingerprint: rec.fp, LeaseUntil: leaseUntil}, nil
		}
		// The owner let the extra lease pass too: take the key over under a new token, which fences
		// the old one.
		rec.token = s.tokens.Add(1)
		rec.suspect = false
		rec.leaseUntil = leaseUntil.UnixNano()
		rec.setExpiry(expiresAt.UnixNano())
		return Claim{Status: Claimed, Token: rec.token, Fingerprint: fp, LeaseUntil: leaseUntil}, nil
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
		return Claim{}, err
	}
	rec := &memRecord{key: key, hash: h, quota: quota, fp: fp, status: InFlight, token: s.tokens.Add(1),
		leaseUntil: leaseUntil.UnixNano(), expiresAt: expiresAt.UnixNano()}
	sh.insert(rec)
	return Claim{Status: Claimed, Token: rec.token, Fingerprint: fp, LeaseUntil: leaseUntil}, nil
}

// owned returns the in-flight record that token owns, or nil.
func (sh *memShard) owned(key Key, h uint64, token uint64) *memRecord {
	rec := sh.find(key, h)
	if rec == nil || rec.status != InFlight || rec.token != token {
		return nil
	}
	return rec
}

// Renew implements Store.
func (s *MemoryStore) Renew(ctx context.Context, key Key, token uint64, leaseUntil time.Time) error {
	if s == nil || s.shards == nil {
		return errZeroMemoryStore
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
		return ErrLeaseLost
	}
	rec.leaseUntil = leaseUntil.UnixNano()
	rec.suspect = false
	return nil
}

// Complete implements Store. It copies resp: the caller may reuse its buffers at once.
func (s *MemoryStore) Complete(ctx context.Context, key Key, token uint64, resp Response, expiresAt time.Time) error {
	var fs []field
	if resp.Header != nil {
		fs = make([]field, 0, len(resp.Header))
		for k, vs := range resp.Header {
			fs = append(fs, field{k, vs})
		}
	}
	return s.complete(ctx, key, token, resp.Status, fs, resp.Header != nil, resp.Body, expiresAt)
}

// complete is Complete on header fields: the middleware's path, which never builds a header map for
// a response that may never be replayed.
func (s *MemoryStore) complete(ctx context.Context, key Key, token uint64, status int, fields []field, hasHeader bool, body []byte, expiresAt time.Time) error {
	if s == nil || s.shards == nil {
		return errZeroMemoryStore
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// The copy is made outside the lock: a large body copy must not stall the shard.
	if !hasHeader {
		fields = nil
	}
	blob, hdrLen := encodeResponse(fields, body)
	size := int64(len(blob))
	h := s.hash(key)
	sh := s.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	rec := sh.owned(key, h, token)
	if rec == nil {
		return ErrLeaseLost
	}
	if size >= smallResponse && sh.bytes+size > s.shardBytes {
		return ErrStoreFull
	}
	rec.status = Completed
	rec.code, rec.blob, rec.hdrLen, rec.hasHeader = status, blob, hdrLen, hasHeader
	rec.setExpiry(expiresAt.UnixNano())
	rec.size = size
	sh.bytes += size
	return nil
}

// Release implements Store.
func (s *MemoryStore) Release(ctx context.Context, key Key, token uint64) error {
	if s == nil || s.shards == nil {
		return errZeroMemoryStore
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
		return ErrLeaseLost
	}
	sh.drop(rec)
	return nil
}

// Lookup implements Store.
func (s *MemoryStore) Lookup(ctx context.Context, key Key, now time.Time) (Record, error) {
	if s == nil || s.shards == nil {
		return Record{}, errZeroMemoryStore
	}
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	h := s.hash(key)
	sh := s.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	rec := sh.live(key, h, now.UnixNano())
	if rec == nil {
		return Record{}, ErrNotFound
	}
	out := Record{
		Fingerprint: rec.fp,
		Status:      rec.status,
		Token:       rec.token,
		LeaseUntil:  unixTime(rec.leaseUntil),
		ExpiresAt:   unixTime(rec.expiresAt),
	}
	if rec.status == Completed {
		out.Response = rec.response()
	}
	return out, nil
}

// Len returns the number of records held, expired ones not yet dropped included.
func (s *MemoryStore) Len() int {
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

// field is one response header: the form in which the middleware captures headers and the memory
// store keeps them, so that neither has to build (or iterate) a map per request. The store builds the
// http.Header of a record the first time the record is read.
type field struct {
	name string
	vals []string
}

// encodeResponse encodes header fields and body into one pointer-free buffer: for each field its
// name and values, each length-prefixed (uvarint), then the body. It returns the buffer and the
// length of its header part.
func encodeResponse(fields []field, body []byte) ([]byte, int) {
	n := binary.MaxVarintLen64 // the field count
	for _, f := range fields {
		n += 2*binary.MaxVarintLen64 + len(f.name)
		for _, v := range f.vals {
			n += binary.MaxVarintLen64 + len(v)
		}
	}
	b := make([]byte, 0, n+len(body))
	if fields != nil {
		b = appendFields(b, fields)
	}
	hdrLen := len(b)
	return append(b, body...), hdrLen
}

// appendFields appends the count of fs, then each field's name and values, each length-prefixed
// (uvarint): the header part of encodeResponse's buffer and of a sealed envelope.
func appendFields(dst []byte, fs []field) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(fs)))
	for _, f := range fs {
		dst = binary.AppendUvarint(dst, uint64(len(f.name)))
		dst = append(dst, f.name...)
		dst = binary.AppendUvarint(dst, uint64(len(f.vals)))
		for _, v := range f.vals {
			dst = binary.AppendUvarint(dst, uint64(len(v)))
			dst = append(dst, v...)
		}
	}
	return dst
}

// decodeFields rebuilds the header encodeResponse encoded: one string holds every name and value,
// one array every value slice. Each value slice is capped, so that an append by a reader can never
// write into a neighbour.
func decodeFields(b []byte) http.Header {
	if len(b) == 0 {
		return http.Header{}
	}
	s := string(b)
	i := 0
	next := func() int {
		v, n := binary.Uvarint(b[i:])
		i += n
		return int(v)
	}
	str := func() string {
		l := next()
		v := s[i : i+l]
		i += l
		return v
	}
	nf := next()
	h := make(http.Header, nf)
	var all []string
	for range nf {
		name := str()
		nv := next()
		if nv > len(all) {
			all = make([]string, max(nv, 4))
		}
		for j := range nv {
			all[j] = str()
		}
		h[name] = all[:nv:nv]
		all = all[nv:]
	}
	return h
}
