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

	"github.com/svcplatform/conventions/idempotency"
)

// DefaultIdempotencyPrefix is the key prefix an IdempotencyStore uses when IdempotencyOptions.Prefix
// is empty.
const DefaultIdempotencyPrefix = "svc:"

// IdempotencyOptions configures an IdempotencyStore. A nil *IdempotencyOptions and the zero value mean
// the defaults.
type IdempotencyOptions struct {
	// Prefix starts every key the store writes, so that several applications (or tests) can share one
	// Redis. Default DefaultIdempotencyPrefix. It must not contain '{' or '}': the store puts its own
	// hash tag right after it.
	Prefix string
}

// IdempotencyStore is an idempotency.Store on Redis. Every method is one round trip: Claim, Complete,
// Renew and Release are Lua scripts (EVALSHA, cached by the server) that decide atomically, and
// Lookup is a plain HMGET. A replay is the Claim itself: the script returns the stored response.
// Renew, Complete and Release change a record only for the fencing token that owns it.
//
// Keys are "<prefix>{<scope hash>}:idem:<key>" for records and "<prefix>{<scope hash>}:idem-seq" for
// the scope's fencing-token counter. The hash tag is the base64url SHA-256 of the scope: every key of
// one scope lands in one cluster slot, a scope can hold any bytes, and two scopes never share a key.
//
// Fencing tokens come from the scope's counter, so they increase and are never reused while any claim
// that held one could still act (the counter outlives every record of its scope); a new counter
// starts at a random point, so tokens of different scopes do not coincide either.
//
// Leases and retention are compared with the times the caller passes, to the nanosecond. Records
// also carry a Redis TTL, the retention measured from the claim's now and rounded up, so Redis frees
// them itself. The TTL is relative rather than PEXPIREAT(expiresAt): an absolute expiry would mix the
// application's clock with the server's, so clock skew (or an injected test clock) would free records
// early; a relative TTL can only keep a record a little longer than its retention, during which the
// stored expiry still makes it invisible.
//
// An IdempotencyStore is safe for concurrent use by many goroutines and many processes sharing the
// Redis. It never closes the client. Its zero value is not usable: call NewIdempotencyStore.
type IdempotencyStore struct {
	client   redis.UniversalClient
	prefix   string
	claim    *redis.Script
	complete *redis.Script
	renew    *redis.Script
	release  *redis.Script
}

var _ idempotency.Store = (*IdempotencyStore)(nil)

// idemTokenStart bounds the random start of a scope's token counter: 2^52 leaves 2^52 claims of
// headroom below 2^53, where Lua's numbers stop being exact.
const idemTokenStart = 1 << 52

// NewIdempotencyStore returns a store on client, which the caller owns: single node, sentinel or
// cluster. It panics when client is nil or the prefix contains a brace (both programming errors).
func NewIdempotencyStore(client redis.UniversalClient, opts *IdempotencyOptions) *IdempotencyStore {
	if client == nil {
		panic("redisstore: NewIdempotencyStore needs a client")
	}
	prefix := DefaultIdempotencyPrefix
	if opts != nil && opts.Prefix != "" {
		prefix = opts.Prefix
	}
	if strings.ContainsAny(prefix, "{}") {
		panic("redisstore: the idempotency key prefix must not contain '{' or '}'")
	}
	return &IdempotencyStore{
		client:   client,
		prefix:   prefix,
		claim:    redis.NewScript(idemClaimLua),
		complete: redis.NewScript(idemCompleteLua),
		renew:    redis.NewScript(idemRenewLua),
		release:  redis.NewScript(idemReleaseLua),
	}
}

// keys returns the record key and the scope's counter key.
func (s *IdempotencyStore) keys(key idempotency.Key) []string {
	sum := sha256.Sum256([]byte(key.Scope))
	var tag [43]byte // base64.RawURLEncoding.EncodedLen(32)
	base64.RawURLEncoding.Encode(tag[:], sum[:])
	base := s.prefix + "{" + string(tag[:]) + "}:idem"
	return []string{base + ":" + key.Key, base + "-seq"}
}

// Claim implements idempotency.Store: one EVALSHA that decides and, when the key is free or its lease
// ended, takes it. A completed record comes back in the same reply, so a replay is one round trip.
func (s *IdempotencyStore) Claim(ctx context.Context, key idempotency.Key, fp idempotency.Fingerprint, now, leaseUntil, expiresAt time.Time) (idempotency.Claim, error) {
	res, err := s.claim.Run(ctx, s.client, s.keys(key),
		fp[:], idemTime(now), idemTime(leaseUntil), idemTime(expiresAt),
		idemTTL(now, expiresAt), now.UnixMilli(), rand.Uint64N(idemTokenStart)+1).Slice()
	if err != nil {
		return idempotency.Claim{}, fmt.Errorf("redisstore: idempotency claim: %w", err)
	}
	c, err := idemParseClaim(res, fp, leaseUntil)
	if err != nil {
		return idempotency.Claim{}, err
	}
	return c, nil
}

// idemParseClaim turns the claim script's reply into a Claim.
func idemParseClaim(res []any, fp idempotency.Fingerprint, leaseUntil time.Time) (idempotency.Claim, error) {
	bad := func(what string) error {
		return fmt.Errorf("redisstore: idempotency claim: unexpected reply (%s)", what)
	}
	if len(res) < 2 {
		return idempotency.Claim{}, bad("short")
	}
	kind, _ := res[0].(string)
	switch kind {
	case "n":
		tok, err := strconv.ParseUint(idemString(res[1]), 10, 64)
		if err != nil || tok == 0 {
			return idempotency.Claim{}, bad("token")
		}
		return idempotency.Claim{Status: idempotency.Claimed, Token: tok, Fingerprint: fp, LeaseUntil: leaseUntil}, nil
	case "i", "c":
		if len(res) < 3 || (kind == "c" && len(res) < 6) {
			return idempotency.Claim{}, bad("short")
		}
		lease, err := idemParseTime(idemString(res[2]))
		if err != nil {
			return idempotency.Claim{}, err
		}
		c := idempotency.Claim{Status: idempotency.InFlight, Fingerprint: fp, LeaseUntil: lease}
		if kind == "i" {
			return c, nil
		}
		c.Status = idempotency.Completed
		resp, err := idemParseResponse(res[3], res[4], res[5])
		if err != nil {
			return idempotency.Claim{}, err
		}
		c.Response = resp
		return c, nil
	case "f":
		if len(res) < 4 {
			return idempotency.Claim{}, bad("short")
		}
		var c idempotency.Claim
		switch idemString(res[1]) {
		case "i":
			c.Status = idempotency.InFlight
		case "c":
			c.Status = idempotency.Completed
		default:
			return idempotency.Claim{}, bad("state")
		}
		stored := idemString(res[2])
		if len(stored) != len(c.Fingerprint) {
			return idempotency.Claim{}, bad("fingerprint")
		}
		copy(c.Fingerprint[:], stored)
		lease, err := idemParseTime(idemString(res[3]))
		if err != nil {
			return idempotency.Claim{}, err
		}
		c.LeaseUntil = lease
		return c, nil
	}
	return idempotency.Claim{}, bad("kind")
}

func idemString(v any) string {
	s, _ := v.(string)
	return s
}

// idemParseResponse rebuilds a stored response from its status, header and body fields.
func idemParseResponse(code, hdr, body any) (*idempotency.Response, error) {
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
	return &idempotency.Response{Status: status, Header: h, Body: b}, nil
}

// Renew implements idempotency.Store.
func (s *IdempotencyStore) Renew(ctx context.Context, key idempotency.Key, token uint64, leaseUntil time.Time) error {
	n, err := s.renew.Run(ctx, s.client, s.keys(key), strconv.FormatUint(token, 10), idemTime(leaseUntil)).Int64()
	if err != nil {
		return fmt.Errorf("redisstore: idempotency renew: %w", err)
	}
	if n == 0 {
		return idempotency.ErrLeaseLost
	}
	return nil
}

// Complete implements idempotency.Store. The record keeps its response until expiresAt; its TTL is
// counted from the claim's now, so Redis frees it no earlier than that.
func (s *IdempotencyStore) Complete(ctx context.Context, key idempotency.Key, token uint64, resp idempotency.Response, expiresAt time.Time) error {
	hdr, hasHdr, err := idemEncodeHeader(resp.Header)
	if err != nil {
		return err
	}
	n, err := s.complete.Run(ctx, s.client, s.keys(key),
		strconv.FormatUint(token, 10), strconv.Itoa(resp.Status), idemTime(expiresAt), idemMillisCeil(expiresAt),
		idemFlag(hasHdr), hdr, idemFlag(resp.Body != nil), resp.Body).Int64()
	if err != nil {
		return fmt.Errorf("redisstore: idempotency complete: %w", err)
	}
	if n == 0 {
		return idempotency.ErrLeaseLost
	}
	return nil
}

func idemFlag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// Release implements idempotency.Store.
func (s *IdempotencyStore) Release(ctx context.Context, key idempotency.Key, token uint64) error {
	n, err := s.release.Run(ctx, s.client, s.keys(key), strconv.FormatUint(token, 10)).Int64()
	if err != nil {
		return fmt.Errorf("redisstore: idempotency release: %w", err)
	}
	if n == 0 {
		return idempotency.ErrLeaseLost
	}
	return nil
}

// Lookup implements idempotency.Store with one HMGET.
func (s *IdempotencyStore) Lookup(ctx context.Context, key idempotency.Key, now time.Time) (idempotency.Record, error) {
	vals, err := s.client.HMGet(ctx, s.keys(key)[0], "st", "fp", "tok", "lease", "exp", "code", "hdr", "body").Result()
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: idempotency lookup: %w", err)
	}
	if len(vals) != 8 || vals[0] == nil {
		return idempotency.Record{}, idempotency.ErrNotFound
	}
	exp, err := idemParseTime(idemString(vals[4]))
	if err != nil {
		return idempotency.Record{}, err
	}
	if !exp.After(now) {
		return idempotency.Record{}, idempotency.ErrNotFound
	}
	rec := idempotency.Record{ExpiresAt: exp}
	fp := idemString(vals[1])
	if len(fp) != len(rec.Fingerprint) {
		return idempotency.Record{}, errors.New("redisstore: stored fingerprint has the wrong length")
	}
	copy(rec.Fingerprint[:], fp)
	if rec.Token, err = strconv.ParseUint(idemString(vals[2]), 10, 64); err != nil {
		return idempotency.Record{}, errors.New("redisstore: stored token is not a number")
	}
	if rec.LeaseUntil, err = idemParseTime(idemString(vals[3])); err != nil {
		return idempotency.Record{}, err
	}
	switch idemString(vals[0]) {
	case "i":
		rec.Status = idempotency.InFlight
	case "c":
		rec.Status = idempotency.Completed
		if rec.Response, err = idemParseResponse(vals[5], vals[6], vals[7]); err != nil {
			return idempotency.Record{}, err
		}
	default:
		return idempotency.Record{}, errors.New("redisstore: stored record has an unknown state")
	}
	return rec, nil
}
