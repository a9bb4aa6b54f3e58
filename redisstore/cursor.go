package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/svcplatform/conventions/webhook"
)

// DefaultCursorPrefix is the key prefix a CursorStore uses when CursorStoreOptions.Prefix is empty.
const DefaultCursorPrefix = "svc:"

// CursorStoreOptions configures a CursorStore. A nil *CursorStoreOptions and the zero value mean the defaults.
type CursorStoreOptions struct {
	// Prefix starts every key the store writes, so that several applications (or tests) can share one
	// Redis. Default DefaultCursorPrefix. It must not contain '{' or '}': the store puts a hash tag
	// after it.
	Prefix string
}

// cursorAdvanceScript is the compare-and-set. Values are compared as decimal strings, never through
// Lua numbers, which are doubles and would round sequences above 2^53.
const cursorAdvanceScript = `
local cur = redis.call('GET', KEYS[1])
if cur == false then cur = '0' end
if cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
`

// CursorStore is a webhook.CursorStore on Redis: one string key per stream holding the last sequence
// processed, "<prefix>webhook-cursor:{<stream>}", with no expiry. Advance is a Lua compare-and-set, so
// replicas sharing the Redis never both move a cursor. Like every webhook.CursorStore it takes
// Advance's arguments as the webhook.Tracker passes them, a move forward to at most
// webhook.MaxSequence, and does not check them again.
//
// Redis cannot commit a cursor together with the consumer's own database writes; where that matters,
// use pgstore.CursorStore's ProcessInTx. Persistence is whatever the Redis server is configured for: a
// cursor lost with an unpersisted Redis restarts the stream at 1 (StartAtBeginning) and replays
// everything the producer retains.
//
// It is safe for concurrent use. It does not own the client and never closes it. The zero value is not
// usable: its methods return an error that wraps ErrNotBuilt. Build one with NewCursorStore.
type CursorStore struct {
	client  redis.UniversalClient
	prefix  string
	advance *redis.Script
}

var _ webhook.CursorStore = (*CursorStore)(nil)

// NewCursorStore returns a store on client; nil opts mean the defaults. A nil client, or a prefix
// that contains a brace (it would change the keys' cluster hash slot), is an error.
func NewCursorStore(client redis.UniversalClient, opts *CursorStoreOptions) (*CursorStore, error) {
	if client == nil {
		return nil, errors.New("redisstore: NewCursorStore needs a client")
	}
	prefix := DefaultCursorPrefix
	if opts != nil && opts.Prefix != "" {
		prefix = opts.Prefix
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("redisstore: NewCursorStore: the key prefix %q must not contain '{' or '}'", prefix)
	}
	return &CursorStore{client: client, prefix: prefix, advance: redis.NewScript(cursorAdvanceScript)}, nil
}

// key is injective: the stream sits verbatim between a fixed prefix and the closing brace. The braces
// make the stream the cluster hash tag (for a stream without braces of its own; a single-key store
// works in any slot either way).
func (s *CursorStore) key(stream string) string {
	return s.prefix + "webhook-cursor:{" + stream + "}"
}

// Get returns the stream's cursor, or 0 when it has none.
func (s *CursorStore) Get(ctx context.Context, stream string) (uint64, error) {
	if s == nil || s.client == nil {
		return 0, errZeroCursorStore
	}
	v, err := s.client.Get(ctx, s.key(stream)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("redisstore: cursor get: %w", err)
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n > webhook.MaxSequence {
		return 0, fmt.Errorf("redisstore: cursor of stream %q is not a sequence number", stream)
	}
	return n, nil
}

// Advance moves the stream's cursor from from to to if it is at from now, and otherwise returns
// webhook.ErrCursorConflict; see webhook.CursorStore.
func (s *CursorStore) Advance(ctx context.Context, stream string, from, to uint64) error {
	if s == nil || s.client == nil {
		return errZeroCursorStore
	}
	ok, err := s.advance.Run(ctx, s.client, []string{s.key(stream)},
		strconv.FormatUint(from, 10), strconv.FormatUint(to, 10)).Int()
	if err != nil {
		return fmt.Errorf("redisstore: cursor advance: %w", err)
	}
	if ok != 1 {
		return webhook.ErrCursorConflict
	}
	return nil
}
