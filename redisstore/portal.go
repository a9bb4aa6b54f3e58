package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/svcplatform/conventions/portal"
)

// DefaultPortalPrefix is the key prefix a PortalStore uses when PortalStoreOptions.Prefix is empty.
const DefaultPortalPrefix = "svc:"

// PortalStoreOptions configures a PortalStore. A nil *PortalStoreOptions and the zero value mean the
// defaults.
type PortalStoreOptions struct {
	// Prefix starts every key the store writes, so that several applications (or tests) can share one
	// Redis. Default DefaultPortalPrefix. It must not contain '{' or '}': the store puts a hash tag
	// after it.
	Prefix string
}

// PortalStore is a portal.Store on Redis: one string key per one-time link and per browser session,
// "<prefix>portal:{<key>}" under the key the Portal derives (a hash: Redis holds nothing that opens
// the portal), whose value is the portal.Session's JSON — Permissions null for the full key's, []
// for none, which the Portal must tell apart. Replicas that share the Redis share the portal: a link
// minted on one opens on any.
//
// Put is a SET with a time to live of ExpiresAt − now, rounded up to the millisecond, so Redis
// removes each entry on its own once it has expired; an entry that has expired by now (a TTL of zero
// or less) is deleted instead, since it replaces what the key held. Get and Take compare ExpiresAt
// with the now they are given as well, so an entry is never served at or after its ExpiresAt, to the
// nanosecond, however late Redis's clock removes it. Take is GETDEL (Redis 6.2 or later; an older
// server answers an error, and the Portal refuses to open a session): of any number of Takes of one
// link, on any replica, exactly one gets its session.
//
// A Redis with an eviction policy, or restarted without persistence, forgets links and sessions; the
// cost is a visitor who must open a new link, never access that should not be, so NewPortalStore does
// not refuse those settings as NewIdempotencyStore does. Replication is asynchronous, though: a
// failover to a replica the GETDEL had not reached lets a link be used a second time within its
// lifetime (portal.Options.LinkTTL, 10 minutes). Where that matters, keep the portal in PostgreSQL
// (pgstore.PortalStore).
//
// It is safe for concurrent use. It does not own the client and never closes it. The zero value is
// not usable: its methods return an error that wraps ErrNotBuilt. Build one with NewPortalStore.
type PortalStore struct {
	client redis.UniversalClient
	prefix string
}

var _ portal.Store = (*PortalStore)(nil)

// NewPortalStore returns a store on client; nil opts mean the defaults. A nil client, or a prefix
// that contains a brace (it would change the keys' cluster hash slot), is an error.
func NewPortalStore(client redis.UniversalClient, opts *PortalStoreOptions) (*PortalStore, error) {
	if client == nil {
		return nil, errors.New("redisstore: NewPortalStore needs a client")
	}
	prefix := DefaultPortalPrefix
	if opts != nil && opts.Prefix != "" {
		prefix = opts.Prefix
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("redisstore: NewPortalStore: the key prefix %q must not contain '{' or '}'", prefix)
	}
	return &PortalStore{client: client, prefix: prefix}, nil
}

// key is injective: the Portal's key sits verbatim between a fixed prefix and the closing brace.
func (s *PortalStore) key(key string) string { return s.prefix + "portal:{" + key + "}" }

// Put implements portal.Store.
func (s *PortalStore) Put(ctx context.Context, key string, sess portal.Session, now time.Time) error {
	if s == nil || s.client == nil {
		return errZeroPortalStore
	}
	ttl := sess.ExpiresAt.Sub(now)
	if ttl <= 0 {
		if err := s.client.Del(ctx, s.key(key)).Err(); err != nil {
			return fmt.Errorf("redisstore: put portal session: %w", err)
		}
		return nil
	}
	// Up: Redis never removes an entry before its ExpiresAt (the check on reading makes it end then).
	ttl = (ttl + time.Millisecond - 1).Truncate(time.Millisecond)
	b, err := json.Marshal(sess)
	if err != nil {
		return fmt.Errorf("redisstore: put portal session: %w", err)
	}
	if err := s.client.Set(ctx, s.key(key), b, ttl).Err(); err != nil {
		return fmt.Errorf("redisstore: put portal session: %w", err)
	}
	return nil
}

// Get implements portal.Store.
func (s *PortalStore) Get(ctx context.Context, key string, now time.Time) (portal.Session, error) {
	if s == nil || s.client == nil {
		return portal.Session{}, errZeroPortalStore
	}
	return portalSession("get", s.client.Get(ctx, s.key(key)), now)
}

// Take implements portal.Store.
func (s *PortalStore) Take(ctx context.Context, key string, now time.Time) (portal.Session, error) {
	if s == nil || s.client == nil {
		return portal.Session{}, errZeroPortalStore
	}
	return portalSession("take", s.client.GetDel(ctx, s.key(key)), now)
}

// portalSession decodes a GET's or GETDEL's answer: ErrNotFound for no value or one expired at now.
func portalSession(op string, cmd *redis.StringCmd, now time.Time) (portal.Session, error) {
	b, err := cmd.Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return portal.Session{}, portal.ErrNotFound
	case err != nil:
		return portal.Session{}, fmt.Errorf("redisstore: %s portal session: %w", op, err)
	}
	var sess portal.Session
	if err := json.Unmarshal(b, &sess); err != nil {
		return portal.Session{}, fmt.Errorf("redisstore: %s portal session: the value is not a session: %w", op, err)
	}
	if !sess.ExpiresAt.After(now) {
		return portal.Session{}, portal.ErrNotFound
	}
	return sess, nil
}

// Delete implements portal.Store.
func (s *PortalStore) Delete(ctx context.Context, key string) error {
	if s == nil || s.client == nil {
		return errZeroPortalStore
	}
	if err := s.client.Del(ctx, s.key(key)).Err(); err != nil {
		return fmt.Errorf("redisstore: delete portal session: %w", err)
	}
	return nil
}
