package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/svcplatform/conventions/idempotency/driver"
)

// DefaultIdempotencyPrefix is the key prefix an IdempotencyStore uses when IdempotencyStoreOptions.Prefix
// is empty.
const DefaultIdempotencyPrefix = "svc:"

// ErrEvictionPolicy is what NewIdempotencyStore wraps when a Redis it would write to runs with a
// maxmemory-policy other than noeviction.
var ErrEvictionPolicy = errors.New("redisstore: the Redis may evict idempotency records")

// ErrNotBuilt: a store used without its constructor (the zero CursorStore, IdempotencyStore or
// PortalStore, or a nil pointer to one), which has no client. Every method returns an error that matches it with
// errors.Is and names the type.
var ErrNotBuilt = errors.New("redisstore: not built with its constructor")

// notBuiltError is ErrNotBuilt for one type: its message names the type and its constructor.
type notBuiltError struct{ msg string }

func (e *notBuiltError) Error() string        { return e.msg }
func (e *notBuiltError) Is(target error) bool { return target == ErrNotBuilt }

var (
	errZeroCursorStore      error = &notBuiltError{"redisstore: CursorStore not built with NewCursorStore"}
	errZeroIdempotencyStore error = &notBuiltError{"redisstore: IdempotencyStore not built with NewIdempotencyStore"}
	errZeroPortalStore      error = &notBuiltError{"redisstore: PortalStore not built with NewPortalStore"}
)

// IdempotencyStoreOptions configures an IdempotencyStore. A nil *IdempotencyStoreOptions and the zero value mean
// the defaults.
type IdempotencyStoreOptions struct {
	// Prefix starts every key the store writes, so that several applications (or tests) can share one
	// Redis. Default DefaultIdempotencyPrefix. It must not contain '{' or '}': the store puts its own
	// hash tag right after it.
	Prefix string

	// MaxRecordsPerScope bounds the live records (in flight and completed) of one scope, a
	// credential: a claim that would create one more gets an error wrapping
	// driver.ErrQuotaExceeded (the middleware answers 429), while the scope's existing keys
	// still replay, complete and are taken over, and other scopes are untouched. 0 (the default)
	// means no quota.
	//
	// A Redis that several tenants share should set one: without it a single tenant can fill the
	// memory every tenant's records live in, and a Redis full under noeviction refuses everyone's new
	// claims. Size it from the traffic a tenant may send: keyed requests per second × retention, with
	// headroom. 100_000 lets a tenant keep up one keyed request a second for the default 24 h
	// retention (86,400 records). The memory it bounds per tenant is that many records of about
	// 1.3 KB each (measured on Redis 7 with 100-byte responses: hash, TTL and quota entry) plus
	// their response bodies: some 130 MB for 100_000 small responses. All replicas sharing a prefix
	// should use the same value: the count lives in Redis, a sorted set per scope beside its records,
	// and records claimed without a quota are not in it.
	MaxRecordsPerScope int

	// AllowEviction skips the check NewIdempotencyStore makes that every Redis it writes to runs
	// with maxmemory-policy noeviction, and so accepts what eviction costs: Redis under memory
	// pressure deletes records it chooses, and an evicted completed record lets a retry of that
	// request run its handler again (a second charge, a second order); an evicted in-flight record
	// lets a duplicate run while the first still does; an evicted token counter or quota set lets
	// tokens restart or a scope exceed its quota. Set it only for a Redis whose policy the store
	// cannot read (CONFIG renamed or forbidden, as managed services do) after confirming the policy
	// another way, or where running a request twice is acceptable. The check runs once, at
	// construction: a later CONFIG SET is not noticed, nor is a replica with another policy that a
	// failover promotes.
	AllowEviction bool
}

// IdempotencyStore is an driver.Store on Redis. Every method is one round trip: Claim, Complete,
// Renew and Release are Lua scripts (EVALSHA, cached by the server) that decide atomically, and
// Lookup is a plain HMGET. A replay is the Claim itself: the script returns the stored response.
// Renew, Complete and Release change a record only for the fencing token that owns it.
//
// Keys are "<prefix>{<scope hash>}:idem:<key>" for records, "<prefix>{<scope hash>}:idem-seq" for
// the scope's fencing-token counter and "<prefix>{<scope hash>}:idem-quota" for the scope's quota
// count (only with IdempotencyStoreOptions.MaxRecordsPerScope). The hash tag is the base64url SHA-256 of
// the scope: every key of one scope lands in one cluster slot, a scope can hold any bytes, and two
// scopes never share a key.
//
// Fencing tokens come from the scope's counter, so they increase and are never reused while any claim
// that held one could still act (the counter outlives every record of its scope); a new counter
// starts at a random point, so tokens of different scopes do not coincide either.
//
// A lease that lapsed is taken over in two steps. The first claim that finds it lapsed only marks
// the record suspected and extends the lease once, to that claim's lease end, answering in flight: the
// owner may merely have been cut off from Redis for longer than a lease while its handler still runs,
// and a renewal or completion within the extra lease keeps the key (a renewal clears the mark). The
// first claim after the extra lease also lapsed takes the key over with a new token.
//
// Leases and retention are compared with the times the caller passes, to the nanosecond. Records
// also carry a Redis TTL, the retention measured from the claim's now and rounded up, so Redis frees
// them itself. The TTL is relative rather than PEXPIREAT(expiresAt): an absolute expiry would mix the
// application's clock with the server's, so clock skew (or an injected test clock) would free records
// early; a relative TTL can only keep a record a little longer than its retention, during which the
// stored expiry still makes it invisible.
//
// What the store promises rests on Redis keeping what it was told, so the server's configuration is
// part of it:
//   - Eviction: NewIdempotencyStore refuses a Redis whose maxmemory-policy is not noeviction (see
//     IdempotencyStoreOptions.AllowEviction for what eviction costs). A Redis full under noeviction
//     answers OOM errors instead: every write fails (claims of new keys, the mark and take-over of a
//     lapsed lease, renewals, completions) and changes nothing, while completed records still replay
//     and in-flight ones still answer in flight. The middleware answers 503 to the new requests and
//     keeps retrying the completions it holds, so no request runs twice; give Redis memory, and set
//     MaxRecordsPerScope so that one tenant cannot be the cause.
//   - Persistence: with AOF (appendonly yes) a restarted Redis keeps its records; appendfsync
//     everysec may lose the last second of writes in a crash (two when the disk is slow), and a
//     completion lost that way runs again on retry; appendfsync always loses none that were
//     acknowledged. RDB snapshots alone lose everything since the last one. A Redis restarted
//     without persistence has forgotten every record: every key in flight or completed before the
//     restart runs its handler again when retried. Do not run the store on such a Redis; enable AOF,
//     or keep the records in PostgreSQL (pgstore.IdempotencyStore, whose claim and response can also
//     commit with the handler's own transaction).
//   - Replication is asynchronous: a failover can lose the last writes the old master acknowledged,
//     with the same effect as a lost second of AOF.
//
// An IdempotencyStore is safe for concurrent use by many goroutines and many processes sharing the
// Redis. It never closes the client. Its zero value is not usable: its methods return an error that
// wraps ErrNotBuilt. Call NewIdempotencyStore.
type IdempotencyStore struct {
	client   redis.UniversalClient
	prefix   string
	quota    int
	claim    *redis.Script
	complete *redis.Script
	renew    *redis.Script
	release  *redis.Script
}

var _ driver.Store = (*IdempotencyStore)(nil)

// idemTokenStart bounds the random start of a scope's token counter: 2^52 leaves 2^52 claims of
// headroom below 2^53, where Lua's numbers stop being exact.
const idemTokenStart = 1 << 52

// NewIdempotencyStore returns a store on client, which the caller owns: single node, sentinel,
// cluster or ring. Unless opts.AllowEviction is set, it first reads maxmemory-policy (CONFIG GET)
// from the server, or from every master of a cluster and every shard of a ring that go-redis holds
// up, and returns an error
// wrapping ErrEvictionPolicy unless each one runs with noeviction; an error too when the policy
// cannot be read (the server does not answer, or refuses CONFIG). It returns an error as well for a
// nil client, a prefix with a brace or a negative MaxRecordsPerScope.
func NewIdempotencyStore(ctx context.Context, client redis.UniversalClient, opts *IdempotencyStoreOptions) (*IdempotencyStore, error) {
	var o IdempotencyStoreOptions
	if opts != nil {
		o = *opts
	}
	if client == nil {
		return nil, errors.New("redisstore: NewIdempotencyStore needs a client")
	}
	if o.Prefix == "" {
		o.Prefix = DefaultIdempotencyPrefix
	}
	if strings.ContainsAny(o.Prefix, "{}") {
		return nil, fmt.Errorf("redisstore: the idempotency key prefix %q contains '{' or '}', which would break the store's cluster hash tag", o.Prefix)
	}
	if o.MaxRecordsPerScope < 0 {
		return nil, fmt.Errorf("redisstore: IdempotencyStoreOptions.MaxRecordsPerScope is %d; use 0 for no quota", o.MaxRecordsPerScope)
	}
	if !o.AllowEviction {
		if err := checkNoEviction(ctx, client); err != nil {
			return nil, err
		}
	}
	return &IdempotencyStore{
		client:   client,
		prefix:   o.Prefix,
		quota:    o.MaxRecordsPerScope,
		claim:    redis.NewScript(idemClaimLua),
		complete: redis.NewScript(idemCompleteLua),
		renew:    redis.NewScript(idemRenewLua),
		release:  redis.NewScript(idemReleaseLua),
	}, nil
}

// keys returns the record key, the scope's counter key and the scope's quota set.
func (s *IdempotencyStore) keys(key driver.Key) []string {
	sum := sha256.Sum256([]byte(key.Scope))
	var tag [43]byte // base64.RawURLEncoding.EncodedLen(32)
	base64.RawURLEncoding.Encode(tag[:], sum[:])
	base := s.prefix + "{" + string(tag[:]) + "}:idem"
	return []string{base + ":" + key.Key, base + "-seq", base + "-quota"}
}

// Claim implements driver.Store: one EVALSHA that decides and, when the key is free or its lease
// ended twice (see the type's docs), takes it. A completed record comes back in the same reply, so a
// replay is one round trip. With a quota, a claim that would create a record in a scope already at
// its quota returns an error wrapping driver.ErrQuotaExceeded and changes nothing.
func (s *IdempotencyStore) Claim(ctx context.Context, key driver.Key, fp driver.Fingerprint, now, leaseUntil, expiresAt time.Time) (driver.Claim, error) {
	if s == nil || s.client == nil {
		return driver.Claim{}, errZeroIdempotencyStore
	}
	res, err := s.claim.Run(ctx, s.client, s.keys(key),
		fp[:], idemTime(now), idemTime(leaseUntil), idemTime(expiresAt),
		idemTTL(now, expiresAt), now.UnixMilli(), rand.Uint64N(idemTokenStart)+1,
		s.quota, key.Key, idemMillisCeil(expiresAt)).Slice()
	if err != nil {
		return driver.Claim{}, fmt.Errorf("redisstore: idempotency claim: %w", err)
	}
	c, err := idemParseClaim(res, fp, leaseUntil)
	if errors.Is(err, driver.ErrQuotaExceeded) {
		return driver.Claim{}, fmt.Errorf("redisstore: idempotency claim: scope at its quota of %d records (IdempotencyStoreOptions.MaxRecordsPerScope): %w", s.quota, err)
	}
	if err != nil {
		return driver.Claim{}, err
	}
	return c, nil
}

// idemParseClaim turns the claim script's reply into a Claim.
func idemParseClaim(res []any, fp driver.Fingerprint, leaseUntil time.Time) (driver.Claim, error) {
	bad := func(what string) error {
		return fmt.Errorf("redisstore: idempotency claim: unexpected reply (%s)", what)
	}
	if len(res) < 2 {
		return driver.Claim{}, bad("short")
	}
	kind, _ := res[0].(string)
	switch kind {
	case "n":
		tok, err := strconv.ParseUint(idemString(res[1]), 10, 64)
		if err != nil || tok == 0 {
			return driver.Claim{}, bad("token")
		}
		return driver.Claim{Status: driver.Claimed, Token: tok, Fingerprint: fp, LeaseUntil: leaseUntil}, nil
	case "i", "c":
		if len(res) < 3 || (kind == "c" && len(res) < 6) {
			return driver.Claim{}, bad("short")
		}
		lease, err := idemParseTime(idemString(res[2]))
		if err != nil {
			return driver.Claim{}, err
		}
		c := driver.Claim{Status: driver.InFlight, Fingerprint: fp, LeaseUntil: lease}
		if kind == "i" {
			return c, nil
		}
		c.Status = driver.Completed
		resp, err := idemParseResponse(res[3], res[4], res[5])
		if err != nil {
			return driver.Claim{}, err
		}
		c.Response = resp
		return c, nil
	case "q":
		return driver.Claim{}, driver.ErrQuotaExceeded
	case "f":
		if len(res) < 4 {
			return driver.Claim{}, bad("short")
		}
		var c driver.Claim
		switch idemString(res[1]) {
		case "i":
			c.Status = driver.InFlight
		case "c":
			c.Status = driver.Completed
		default:
			return driver.Claim{}, bad("state")
		}
		stored := idemString(res[2])
		if len(stored) != len(c.Fingerprint) {
			return driver.Claim{}, bad("fingerprint")
		}
		copy(c.Fingerprint[:], stored)
		lease, err := idemParseTime(idemString(res[3]))
		if err != nil {
			return driver.Claim{}, err
		}
		c.LeaseUntil = lease
		return c, nil
	}
	return driver.Claim{}, bad("kind")
}

func idemString(v any) string {
	s, _ := v.(string)
	return s
}

// idemParseResponse rebuilds a stored response from its status, header and body fields.
func idemParseResponse(code, hdr, body any) (*driver.Response, error) {
	status, err := strconv.Atoi(idemString(code))
	if err != nil {
		return nil, errors.New("redisstore: stored status is not a number")
	}
	h, err := idemDecodeHeader(hdr)
	if err != nil {
		return nil, err
	}
	b, err := idemDecodeBody(body)
	if err != nil {
		return nil, err
	}
	return &driver.Response{Status: status, Header: h, Body: b}, nil
}

// Renew implements driver.Store.
func (s *IdempotencyStore) Renew(ctx context.Context, key driver.Key, token uint64, leaseUntil time.Time) error {
	if s == nil || s.client == nil {
		return errZeroIdempotencyStore
	}
	n, err := s.renew.Run(ctx, s.client, s.keys(key), strconv.FormatUint(token, 10), idemTime(leaseUntil)).Int64()
	if err != nil {
		return fmt.Errorf("redisstore: idempotency renew: %w", err)
	}
	if n == 0 {
		return driver.ErrLeaseLost
	}
	return nil
}

// Complete implements driver.Store. The record keeps its response until expiresAt; its TTL is
// counted from the claim's now, so Redis frees it no earlier than that, and its place in the scope's
// quota lasts as long. A Redis out of memory refuses the completion with an error (redis.IsOOMError
// reports it) and stores nothing; the owner still holds its claim and may try again.
func (s *IdempotencyStore) Complete(ctx context.Context, key driver.Key, token uint64, resp driver.Response, expiresAt time.Time) error {
	if s == nil || s.client == nil {
		return errZeroIdempotencyStore
	}
	hdr, hasHdr, err := idemEncodeHeader(resp.Header)
	if err != nil {
		return err
	}
	n, err := s.complete.Run(ctx, s.client, s.keys(key),
		strconv.FormatUint(token, 10), strconv.Itoa(resp.Status), idemTime(expiresAt), idemMillisCeil(expiresAt),
		idemFlag(hasHdr), hdr, idemFlag(resp.Body != nil), resp.Body, key.Key).Int64()
	if err != nil {
		return fmt.Errorf("redisstore: idempotency complete: %w", err)
	}
	if n == 0 {
		return driver.ErrLeaseLost
	}
	return nil
}

func idemFlag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// Release implements driver.Store.
func (s *IdempotencyStore) Release(ctx context.Context, key driver.Key, token uint64) error {
	if s == nil || s.client == nil {
		return errZeroIdempotencyStore
	}
	n, err := s.release.Run(ctx, s.client, s.keys(key), strconv.FormatUint(token, 10), key.Key).Int64()
	if err != nil {
		return fmt.Errorf("redisstore: idempotency release: %w", err)
	}
	if n == 0 {
		return driver.ErrLeaseLost
	}
	return nil
}

// Lookup implements driver.Store with one HMGET.
func (s *IdempotencyStore) Lookup(ctx context.Context, key driver.Key, now time.Time) (driver.Record, error) {
	if s == nil || s.client == nil {
		return driver.Record{}, errZeroIdempotencyStore
	}
	vals, err := s.client.HMGet(ctx, s.keys(key)[0], "st", "fp", "tok", "lease", "exp", "code", "hdr", "body").Result()
	if err != nil {
		return driver.Record{}, fmt.Errorf("redisstore: idempotency lookup: %w", err)
	}
	if len(vals) != 8 || vals[0] == nil {
		return driver.Record{}, driver.ErrNotFound
	}
	exp, err := idemParseTime(idemString(vals[4]))
	if err != nil {
		return driver.Record{}, err
	}
	if !exp.After(now) {
		return driver.Record{}, driver.ErrNotFound
	}
	rec := driver.Record{ExpiresAt: exp}
	fp := idemString(vals[1])
	if len(fp) != len(rec.Fingerprint) {
		return driver.Record{}, errors.New("redisstore: stored fingerprint has the wrong length")
	}
	copy(rec.Fingerprint[:], fp)
	if rec.Token, err = strconv.ParseUint(idemString(vals[2]), 10, 64); err != nil {
		return driver.Record{}, errors.New("redisstore: stored token is not a number")
	}
	if rec.LeaseUntil, err = idemParseTime(idemString(vals[3])); err != nil {
		return driver.Record{}, err
	}
	switch idemString(vals[0]) {
	case "i":
		rec.Status = driver.InFlight
	case "c":
		rec.Status = driver.Completed
		if rec.Response, err = idemParseResponse(vals[5], vals[6], vals[7]); err != nil {
			return driver.Record{}, err
		}
	default:
		return driver.Record{}, errors.New("redisstore: stored record has an unknown state")
	}
	return rec, nil
}

// Backend reports "redis", for idempotency's Hooks (driver.Backender).
func (s *IdempotencyStore) Backend() string { return "redis" }
