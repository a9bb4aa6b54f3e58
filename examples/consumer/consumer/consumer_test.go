package consumer_test

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/examples/consumer/consumer"
	"github.com/svcplatform/conventions/sandbox"
	"github.com/svcplatform/conventions/sandbox/sandboxtest"
	"github.com/svcplatform/conventions/webhook"
)

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// setup wires a Consumer to an in-process producer (sandboxtest) that delivers through faults. The
// consumer needs the endpoint's ID and secret, the producer the consumer's URL: the test server
// forwards to a consumer installed once both exist.
func setup(t *testing.T, opts *sandboxtest.Options, cfg consumer.Config) (*consumer.Consumer, *sandboxtest.Producer, *syncBuffer) {
	t.Helper()
	var current atomic.Pointer[consumer.Consumer]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { current.Load().ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	p := sandboxtest.NewProducer(t, srv.URL+"/webhooks", opts)
	logs := &syncBuffer{}
	cfg.EndpointID, cfg.Secret, cfg.BaseURL, cfg.APIKey = p.EndpointID, p.Secret, p.URL, p.APIKey
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	c, err := consumer.New(cfg)
	require.NoError(t, err)
	current.Store(c)
	return c, p, logs
}

func TestConsumerLosesNothingUnderFaults(t *testing.T) {
	ctx := context.Background()
	c, p, logs := setup(t, &sandboxtest.Options{
		Faults: sandbox.Faults{Drop: 0.2, Duplicate: 0.15, Reorder: 0.15, BadSignature: 0.1},
		Rand:   rand.New(rand.NewPCG(7, 7)),
	}, consumer.Config{Audit: true})
	const n = 100
	for i := range n {
		_, err := p.Emit(ctx, "order.created", map[string]any{"id": "ord_" + string(rune('a'+i%26))})
		require.NoError(t, err)
	}
	// A drop is noticed by the next delivery; a clean last one reveals any trailing gap.
	require.NoError(t, p.SetFaults(sandbox.Faults{}))
	_, err := p.Emit(ctx, "test.end", map[string]any{})
	require.NoError(t, err)

	st := c.Stats()
	require.Equal(t, int64(n+1), st.Processed, "every event processed")
	require.Zero(t, st.ProcessedTwice, "none twice")
	require.Positive(t, st.Recovered, "gaps were filled by range fetch")
	require.Positive(t, st.Duplicates, "duplicated deliveries were acknowledged, not processed")
	require.Positive(t, st.Rejected, "badly signed deliveries were refused")
	require.Equal(t, n+1, strings.Count(logs.String(), `msg="processed event"`), "each event is logged once")
}

func TestConsumerCatchesUpOnItsOwn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, p, _ := setup(t, nil, consumer.Config{CatchUpInterval: 10 * time.Millisecond, Audit: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- c.Serve(ctx, ln) }()

	// Published but never delivered, as if every delivery had been lost: only the periodic catch-up
	// can find these.
	for range 5 {
		_, err := p.Publish(ctx, "order.created", map[string]any{"id": "ord_x"})
		require.NoError(t, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for c.Stats().Processed < 5 {
		require.True(t, time.Now().Before(deadline), "the consumer caught up with %d of 5 events", c.Stats().Processed)
		<-tick.C
	}
	require.Equal(t, int64(5), c.Stats().Recovered)
	cancel()
	require.NoError(t, <-served, "Serve returns nil after a clean shutdown")
}

func TestConsumerProcessHookFailureIsRetried(t *testing.T) {
	ctx := context.Background()
	var fail atomic.Bool
	fail.Store(true)
	var seen []uint64
	c, p, _ := setup(t, &sandboxtest.Options{Retries: -1}, consumer.Config{Process: func(_ context.Context, s webhook.Step) error {
		if fail.Load() {
			return context.DeadlineExceeded
		}
		seen = append(seen, s.Event.Sequence)
		return nil
	}})
	_, err := p.Emit(ctx, "order.created", map[string]any{})
	require.NoError(t, err)
	require.Zero(t, c.Stats().Processed)
	require.Equal(t, int64(1), c.Stats().Unavailable, "a failed hook answers 503 so the producer retries")
	fail.Store(false)
	_, err = p.Emit(ctx, "order.created", map[string]any{})
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 2}, seen, "the failed event is processed first, then the next")
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	good := consumer.Config{EndpointID: "we_1", Secret: "whsec_x", BaseURL: "http://127.0.0.1:1", APIKey: "sk_sandbox_x"}
	for name, mutate := range map[string]func(*consumer.Config){
		"no secret":   func(c *consumer.Config) { c.Secret = "" },
		"no endpoint": func(c *consumer.Config) { c.EndpointID = "" },
		"no API key":  func(c *consumer.Config) { c.APIKey = "" },
		"bad URL":     func(c *consumer.Config) { c.BaseURL = "not a url" },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := good
			mutate(&cfg)
			_, err := consumer.New(cfg)
			require.Error(t, err)
		})
	}
	_, err := consumer.New(good)
	require.NoError(t, err)
}
