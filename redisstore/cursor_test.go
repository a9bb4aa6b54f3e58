package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/redisstore"
	"github.com/svcplatform/conventions/redisstore/internal/redistest"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/cursortest"
)

func TestCursorStoreConformance(t *testing.T) {
	cursortest.Run(t, func(t *testing.T) webhook.CursorStore {
		client, prefix := redistest.Client(t)
		return must(redisstore.NewCursorStore(client, &redisstore.CursorStoreOptions{Prefix: prefix}))
	})
}

// cursorCtx is the test's context: no deadline of its own, since these tests assert values, not
// speed; go test's -timeout bounds them.
func cursorCtx(t *testing.T) context.Context { return t.Context() }

func TestCursorStoreKeys(t *testing.T) {
	client, prefix := redistest.Client(t)
	s := must(redisstore.NewCursorStore(client, &redisstore.CursorStoreOptions{Prefix: prefix}))
	ctx := cursorCtx(t)
	require.NoError(t, s.Advance(ctx, "we_1", 0, 42))

	v, err := client.Get(ctx, prefix+"webhook-cursor:{we_1}").Result()
	require.NoError(t, err)
	require.Equal(t, "42", v)
	ttl, err := client.TTL(ctx, prefix+"webhook-cursor:{we_1}").Result()
	require.NoError(t, err)
	require.Equal(t, time.Duration(-1), ttl, "a cursor never expires")
}

func TestCursorStoreCorruptValue(t *testing.T) {
	client, prefix := redistest.Client(t)
	s := must(redisstore.NewCursorStore(client, &redisstore.CursorStoreOptions{Prefix: prefix}))
	ctx := cursorCtx(t)
	for _, bad := range []string{"x", "-1", "9223372036854775808", "1.5"} {
		require.NoError(t, client.Set(ctx, prefix+"webhook-cursor:{we_bad}", bad, 0).Err())
		_, err := s.Get(ctx, "we_bad")
		require.Error(t, err, bad)
		require.ErrorIs(t, s.Advance(ctx, "we_bad", 0, 1), webhook.ErrCursorConflict, "a corrupt cursor is never overwritten blindly")
	}
}

func TestCursorStoreLargeSequencesAreExact(t *testing.T) {
	// Lua numbers are doubles: a script comparing with tonumber would confuse these two.
	client, prefix := redistest.Client(t)
	s := must(redisstore.NewCursorStore(client, &redisstore.CursorStoreOptions{Prefix: prefix}))
	ctx := cursorCtx(t)
	const big = uint64(1)<<53 + 1
	require.NoError(t, s.Advance(ctx, "we_1", 0, big))
	require.ErrorIs(t, s.Advance(ctx, "we_1", big-1, big+1), webhook.ErrCursorConflict)
	require.NoError(t, s.Advance(ctx, "we_1", big, big+1))
	got, err := s.Get(ctx, "we_1")
	require.NoError(t, err)
	require.Equal(t, big+1, got)
}

func TestNewCursorStorePanicsOnMisuse(t *testing.T) {
	client, _ := redistest.Client(t)
	require.Panics(t, func() { must(redisstore.NewCursorStore(nil, nil)) })
	_, err := redisstore.NewCursorStore(client, &redisstore.CursorStoreOptions{Prefix: "a{b}:"})
	require.ErrorContains(t, err, `redisstore: NewCursorStore: the key prefix "a{b}:" must not contain '{' or '}'`)
	_, err = redisstore.NewCursorStore(nil, nil)
	require.EqualError(t, err, "redisstore: NewCursorStore needs a client")
	require.NotPanics(t, func() { must(redisstore.NewCursorStore(client, nil)) })
}

func TestCursorStoreUnreachable(t *testing.T) {
	client, prefix := redistest.Client(t)
	s := must(redisstore.NewCursorStore(client, &redisstore.CursorStoreOptions{Prefix: prefix}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	_, err := s.Get(ctx, "we_1")
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
