// Package consumer is the reference webhook consumer: it receives an order server's deliveries,
// verifies their signatures, applies the sequence rule, fills gaps through range retrieval, and keeps
// its cursor in a webhook.CursorStore (memory, or PostgreSQL through pgstore). Each event is processed
// once, in sequence order, and logged when it is.
//
// The work is the webhook package's; this package only wires it, which is what a product team's
// consumer looks like:
//
//	verifier := webhook.NewVerifier([]string{secret}, nil)          // X-SVC-Signature, both directions of tolerance
//	ranges := webhook.NewRangeClient(baseURL, apiKey, verifier, nil) // GET …/events, signature-checked
//	tracker := webhook.NewTracker(cursors, ranges, process, nil)     // duplicates, gaps, cursor
//	receiver := webhook.NewReceiver(endpointID, verifier, tracker, nil)
//	http.Handle("POST /webhooks", receiver)
package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcplatform/conventions/examples/internal/graceful"
	"github.com/svcplatform/conventions/webhook"
)

// DefaultCatchUpInterval is how often Serve asks the producer for events after the cursor. Deliveries
// find gaps by themselves; this finds the one gap they cannot: the newest events, when their deliveries
// were lost and no later delivery has come to reveal it.
const DefaultCatchUpInterval = 30 * time.Second

// Config configures a Consumer.
type Config struct {
	// EndpointID is the webhook endpoint ("we_…") whose deliveries this consumer receives: its stream.
	EndpointID string
	// Secret is the endpoint's signing secret ("whsec_…").
	Secret string
	// BaseURL and APIKey reach the order server's range retrieval, to fill gaps.
	BaseURL string
	APIKey  string
	// Cursors keeps the last processed sequence. Nil means a webhook.MemoryCursorStore: a restarted
	// consumer then starts over from sequence 1, which the range retrieval makes possible.
	Cursors webhook.CursorStore
	// ProcessAdvances says the Process hook moves the cursor itself, in its own transaction (see
	// webhook.TrackerOptions.ProcessAdvances).
	ProcessAdvances bool
	// Process, when set, is called for each event in order, after it is logged; an error leaves the
	// cursor where it is and the event is offered again.
	Process webhook.ProcessFunc
	// Audit remembers every processed event ID so that Stats can count events processed twice. For
	// demos and tests: the memory grows with the stream.
	Audit bool
	// HTTPClient sends range requests; nil means the webhook package's default (30 s timeout).
	HTTPClient *http.Client
	// CatchUpInterval is how often Serve catches up; 0 means DefaultCatchUpInterval, negative never.
	CatchUpInterval time.Duration
	// Logger receives one line per processed event (Info), and one per refused delivery with the
	// status, code and reason (Warn). Nil means none.
	Logger *slog.Logger
	// Hooks are told every verification, delivery, sequence decision and range fetch (otelconv's
	// Telemetry.Webhook reports them to OpenTelemetry, continuing the producer's trace). Nil means none.
	Hooks *webhook.Hooks
	// APIVersion is the API version the consumer's licensee is pinned to: missed events are fetched
	// under it (GET /{APIVersion}/webhook_endpoints/{id}/events). Empty means v1.
	APIVersion string
	// Timeouts bound what one client may hold of Serve's connections; zero fields mean
	// graceful.DefaultTimeouts.
	Timeouts graceful.Timeouts
}

// Stats counts what a Consumer did.
type Stats struct {
	// Processed counts events processed, delivered or fetched; Recovered those among them that were
	// fetched through range retrieval to fill a gap.
	Processed int64
	Recovered int64
	// Duplicates counts deliveries acknowledged without processing: their event was already processed.
	Duplicates int64
	// Rejected counts deliveries refused with a 4xx (a bad signature, say): the producer retries them.
	Rejected int64
	// Unavailable counts deliveries refused with a 5xx because a gap could not be filled yet.
	Unavailable int64
	// ProcessedTwice counts events processed more than once; only counted with Config.Audit. It must
	// stay 0.
	ProcessedTwice int64
}

// Consumer receives one webhook endpoint's deliveries. It is an http.Handler; mount it where the
// endpoint's URL points. A Consumer is safe for concurrent use; build one with New.
type Consumer struct {
	endpoint string
	receiver *webhook.Receiver
	tracker  *webhook.Tracker
	process  webhook.ProcessFunc
	catchUp  time.Duration
	log      *slog.Logger
	timeouts graceful.Timeouts

	processed, recovered, duplicates, rejected, unavailable, twice atomic.Int64
	audit                                                          bool
	mu                                                             sync.Mutex
	seen                                                           map[string]bool
}

// New returns a Consumer configured by cfg.
func New(cfg Config) (*Consumer, error) {
	c := &Consumer{endpoint: cfg.EndpointID, process: cfg.Process, catchUp: cfg.CatchUpInterval, log: cfg.Logger,
		audit: cfg.Audit, seen: make(map[string]bool), timeouts: cfg.Timeouts}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.catchUp == 0 {
		c.catchUp = DefaultCatchUpInterval
	}
	cursors := cfg.Cursors
	if cursors == nil {
		cursors = &webhook.MemoryCursorStore{}
	}
	// One verifier for deliveries and range responses alike: a fetched event is as authentic as a
	// delivered one.
	verifier, err := webhook.NewVerifier([]string{cfg.Secret}, &webhook.VerifierOptions{Hooks: cfg.Hooks})
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	ranges, err := webhook.NewRangeClient(cfg.BaseURL, cfg.APIKey, verifier, &webhook.RangeClientOptions{
		HTTPClient: cfg.HTTPClient, APIVersion: cfg.APIVersion, Hooks: cfg.Hooks})
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	c.tracker, err = webhook.NewTracker(cursors, ranges, c.handle, &webhook.TrackerOptions{
		ProcessAdvances: cfg.ProcessAdvances, Logger: c.log, Hooks: cfg.Hooks})
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	c.receiver, err = webhook.NewReceiver(cfg.EndpointID, verifier, c.tracker, &webhook.ReceiverOptions{Logger: c.log, Hooks: cfg.Hooks})
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	return c, nil
}

// handle processes one event; the Tracker calls it in sequence order, once per event.
func (c *Consumer) handle(ctx context.Context, s webhook.Step) error {
	if c.process != nil {
		if err := c.process(ctx, s); err != nil {
			return err
		}
	}
	var order struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(s.Event.Data, &order) // only for the log line; events of other types have no id
	c.log.InfoContext(ctx, "processed event", "sequence", s.Event.Sequence, "event_id", s.Event.ID,
		"type", s.Event.Type, "api_version", s.Event.APIVersion, "order", order.ID, "recovered_by_range", s.Fetched)
	c.processed.Add(1)
	if s.Fetched {
		c.recovered.Add(1)
	}
	if c.audit {
		c.mu.Lock()
		if c.seen[s.Event.ID] {
			c.twice.Add(1)
		}
		c.seen[s.Event.ID] = true
		c.mu.Unlock()
	}
	return nil
}

// ServeHTTP receives one delivery. The webhook.Receiver does all the work; the recorder only counts
// the outcomes for Stats.
func (c *Consumer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &recorder{ResponseWriter: w}
	c.receiver.ServeHTTP(rec, r)
	switch {
	case rec.status >= 500:
		c.unavailable.Add(1)
	case rec.status >= 400:
		c.rejected.Add(1)
		// The producer retries a refused delivery; say why it was refused, so that an evaluator who
		// turned on the bad_signature fault sees it here. Problems never hold a signature or secret.
		var p struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(rec.body, &p)
		c.log.WarnContext(r.Context(), "delivery refused; the producer will retry it", "status", rec.status,
			"code", p.Code, "sequence", r.Header.Get(webhook.HeaderSequence), "detail", p.Detail)
	default:
		var res struct {
			Outcome string `json:"outcome"`
		}
		if json.Unmarshal(rec.body, &res) == nil && res.Outcome == webhook.Duplicate.String() {
			c.duplicates.Add(1)
		}
	}
}

// CatchUp processes every event the producer holds after the cursor and reports how many.
func (c *Consumer) CatchUp(ctx context.Context) (int, error) {
	return c.tracker.CatchUp(ctx, c.endpoint)
}

// Stats returns what the consumer has done so far.
func (c *Consumer) Stats() Stats {
	return Stats{Processed: c.processed.Load(), Recovered: c.recovered.Load(), Duplicates: c.duplicates.Load(),
		Rejected: c.rejected.Load(), Unavailable: c.unavailable.Load(), ProcessedTwice: c.twice.Load()}
}

// Serve receives deliveries on ln at path "/" and below until ctx is cancelled, catching up every
// CatchUpInterval, then shuts down gracefully. It returns nil after a clean shutdown.
func (c *Consumer) Serve(ctx context.Context, ln net.Listener) error {
	hs := graceful.NewServer(c, c.timeouts, slog.NewLogLogger(c.log.Handler(), slog.LevelWarn))
	conns := graceful.Track(hs)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	var tick <-chan time.Time
	if c.catchUp > 0 {
		t := time.NewTicker(c.catchUp)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return graceful.Shutdown(shutdownCtx, hs, conns)
		case err := <-served:
			return err
		case <-tick:
			if n, err := c.CatchUp(ctx); err != nil && ctx.Err() == nil {
				c.log.WarnContext(ctx, "catch-up failed; the next one retries", "error", err)
			} else if n > 0 {
				c.log.InfoContext(ctx, "caught up", "events", n)
			}
		}
	}
}

// maxRecorded is how much of a response body the recorder keeps: enough for any problem the
// Receiver writes.
const maxRecorded = 4 << 10

// recorder passes a response through and keeps its status and the start of its body.
type recorder struct {
	http.ResponseWriter
	status int
	body   []byte
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if room := maxRecorded - len(r.body); room > 0 {
		r.body = append(r.body, p[:min(room, len(p))]...)
	}
	return r.ResponseWriter.Write(p)
}

// Unwrap gives http.ResponseController the writer underneath.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
