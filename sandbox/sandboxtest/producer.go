package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/internal/randid"
	"github.com/svcplatform/conventions/sandbox"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// Defaults of Options.
const (
	DefaultLicensee = "lic_sandboxtest"
	DefaultRetries  = 5
	DefaultTimeout  = 5 * time.Second
)

// retryStep is how far Flush moves the dispatcher's clock after a failed pass, so that the retry is
// due at once. It is far below a second, so signatures stay within any consumer's tolerance.
const retryStep = time.Millisecond

// maxPasses bounds one Flush: each pass delivers, fails (and so spends one of a bounded number of
// attempts) or hands back, so a Flush that needs more is a bug, not a slow consumer.
const maxPasses = 100_000

// Options tune a Producer. A nil *Options and the zero value mean the defaults.
type Options struct {
	// Faults are the endpoint's initial webhook faults; SetFaults (or PUT on the sandbox control)
	// changes them. The zero value injects none.
	Faults sandbox.Faults
	// Rand draws the faults; nil means unseeded. Use rand.New(rand.NewPCG(seed, seed)) to replay a run.
	Rand *rand.Rand
	// Licensee owns the endpoint and the API key; empty means DefaultLicensee.
	Licensee string
	// Now stamps events and signatures; nil means time.Now.
	Now func() time.Time
	// Retries is how many times Flush retries a delivery the consumer did not answer with a 2xx before
	// abandoning it (it stays retrievable by range); zero means DefaultRetries, negative means none.
	Retries int
	// Transport is the base transport for deliveries (a TLS test server's Client().Transport, say); nil
	// means http.DefaultTransport.
	Transport http.RoundTripper
	// Timeout bounds each delivery request; zero means DefaultTimeout.
	Timeout time.Duration
	// HoldFor is the longest a reordered delivery is held; zero means sandbox.DefaultHoldFor. Flush
	// sends held deliveries anyway, so it matters only to deliveries the test does not flush.
	HoldFor time.Duration
	// APIVersion stamps the events; empty means producer.DefaultAPIVersion.
	APIVersion string
	// Logger receives the producer's logs; nil logs nothing.
	Logger *slog.Logger
}

// Producer is an in-process webhook producer for a consumer's own tests, in the spirit of
// httptest.Server. It has one webhook endpoint, pointing at the consumer's URL, and serves the
// platform's API for it at URL: range retrieval and the sandbox controls, authenticated with APIKey.
// Emit appends an event to the endpoint's stream and delivers it — signed with Secret, with
// X-SVC-Signature and X-SVC-Sequence — through the faults set on the endpoint.
//
// A Producer is safe for concurrent use; Emit and Flush run one at a time, so deliveries happen in a
// reproducible order. Build one with NewProducer; it shuts down when the test ends. The zero value is
// not usable: its Publish, Emit, Flush, SetFaults and Events return ErrNotBuilt, and its Close
// has nothing to stop.
type Producer struct {
	// URL is the base URL of the producer's API, for the consumer's range client: no trailing slash.
	URL string
	// APIKey is a sandbox API key for URL.
	APIKey string
	// Secret is the endpoint's webhook signing secret.
	Secret string
	// EndpointID identifies the consumer's endpoint (its event stream).
	EndpointID string
	// Licensee owns the endpoint and the key.
	Licensee string

	srv       *httptest.Server
	log       *memstore.Log
	pub       *producer.Publisher
	disp      *producer.Dispatcher
	faults    *sandbox.FaultTable
	transport *sandbox.FaultTransport
	now       func() time.Time
	offset    atomic.Int64 // nanoseconds the dispatcher's clock runs ahead, for immediate retries

	flushMu sync.Mutex // one delivery pass at a time

	mu      sync.Mutex
	applied []sandbox.FaultEvent
	stats   producer.Stats
}

// NewProducer starts a producer that delivers to consumerURL (an absolute http or https URL) and
// registers its shutdown with t.Cleanup. It fails the test when it cannot start.
func NewProducer(t testing.TB, consumerURL string, opts *Options) *Producer {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Licensee == "" {
		o.Licensee = DefaultLicensee
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case o.Retries == 0:
		o.Retries = DefaultRetries
	case o.Retries < 0:
		o.Retries = 0
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	p := &Producer{Licensee: o.Licensee, EndpointID: randid.New("we_"), log: memstore.NewLog(),
		faults: &sandbox.FaultTable{}, now: o.Now}
	if err := p.faults.Set(p.EndpointID, o.Faults); err != nil {
		t.Fatalf("sandboxtest: invalid Options.Faults: %v", err)
	}

	// The server starts before the credentials exist so that they can carry its URL; its handler is
	// set before any request can reach it.
	var handler atomic.Pointer[http.Handler]
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*handler.Load()).ServeHTTP(w, r)
	}))
	p.URL = p.srv.URL
	issuer, err := apikey.NewIssuer(nil, &apikey.IssuerOptions{Now: o.Now, SandboxBaseURL: p.URL})
	if err != nil {
		p.srv.Close()
		t.Fatalf("sandboxtest: issuer: %v", err)
	}
	creds, err := issuer.Issue(context.Background(), apikey.Evaluation{Licensee: o.Licensee})
	if err != nil {
		p.srv.Close()
		t.Fatalf("sandboxtest: issuing credentials: %v", err)
	}
	p.APIKey, p.Secret = creds.APIKey, creds.WebhookSecret

	endpoints, err := memstore.NewEndpoints(producer.Endpoint{
		ID: p.EndpointID, URL: consumerURL, Secrets: []string{p.Secret}, Owner: o.Licensee})
	if err != nil {
		p.srv.Close()
		t.Fatalf("sandboxtest: consumer URL: %v", err)
	}
	p.pub, err = producer.NewPublisher(p.log, endpoints, &producer.PublisherOptions{APIVersion: o.APIVersion, Now: o.Now})
	if err != nil {
		p.srv.Close()
		t.Fatalf("sandboxtest: publisher: %v", err)
	}
	p.transport, err = sandbox.NewFaultTransport(o.Transport, p.faults, &sandbox.FaultTransportOptions{
		Rand:    o.Rand,
		HoldFor: o.HoldFor,
		OnFault: p.record,
		Logger:  o.Logger,
	})
	if err != nil {
		p.srv.Close()
		t.Fatalf("sandboxtest: fault transport: %v", err)
	}
	schedule := make([]time.Duration, o.Retries)
	for i := range schedule {
		schedule[i] = retryStep
	}
	if o.Retries == 0 {
		schedule = []time.Duration{} // non-nil: no retries, rather than the default schedule
	}
	p.disp, err = producer.NewDispatcher(p.log, endpoints, &producer.DispatcherOptions{
		Client: &http.Client{Transport: p.transport,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		Timeout:  o.Timeout,
		Schedule: schedule,
		Jitter:   -1,
		Now:      p.dispatcherNow,
		Workers:  1,
		Logger:   o.Logger,
		// Flush retries at once, whatever the consumer's Retry-After asks; and the harness's
		// producer disables no endpoint.
		MaxRetryAfter: -1,
		DisableAfter:  -1,
	})
	if err != nil {
		p.srv.Close()
		t.Fatalf("sandboxtest: dispatcher: %v", err)
	}

	auth, err := apikey.NewAuthenticator(issuer, &apikey.AuthenticatorOptions{Logger: o.Logger})
	if err != nil {
		p.srv.Close()
		t.Fatalf("sandboxtest: authenticator: %v", err)
	}
	notFound := apierror.Writer{}.NotFoundHandler()
	licensee := func(r *http.Request) (string, error) {
		pr, ok := apikey.FromContext(r.Context())
		if !ok {
			return "", apikey.ErrNoPrincipal
		}
		return pr.Licensee, nil
	}
	ranges, err := producer.NewRangeHandler(p.log, endpoints, licensee,
		&producer.RangeHandlerOptions{Now: p.dispatcherNow, Logger: o.Logger})
	if err != nil {
		p.srv.Close()
		t.Fatalf("sandboxtest: range handler: %v", err)
	}
	controls, err := sandbox.NewControls(sandbox.Hooks{
		Trigger:   p.trigger,
		SetFaults: p.setFaults,
		Reset:     p.reset,
	}, &sandbox.ControlsOptions{NotFound: notFound, Logger: o.Logger})
	if err != nil {
		p.srv.Close()
		t.Fatalf("sandboxtest: controls: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", notFound)
	mux.Handle(producer.RangePattern("v1"), auth.Handler(ranges))
	mux.Handle(sandbox.DefaultControlsPrefix+"/", auth.Handler(controls))
	var h http.Handler = apierror.WithRequestID(mux)
	handler.Store(&h)

	t.Cleanup(p.Close)
	return p
}

func (p *Producer) dispatcherNow() time.Time {
	return p.now().Add(time.Duration(p.offset.Load()))
}

func (p *Producer) record(ev sandbox.FaultEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.applied = append(p.applied, ev)
}

// ErrNotBuilt: a Producer that NewProducer did not build.
var ErrNotBuilt = errors.New("sandboxtest: Producer not built with NewProducer")

// Publish appends an event of the given type to the endpoint's stream without delivering it (Flush
// does). data is marshalled with encoding/json; json.RawMessage and []byte are taken as JSON.
func (p *Producer) Publish(ctx context.Context, eventType string, data any) (webhook.Event, error) {
	if p == nil || p.srv == nil {
		return webhook.Event{}, ErrNotBuilt
	}
	ev, err := p.pub.Publish(ctx, p.EndpointID, eventType, data)
	if err != nil {
		return webhook.Event{}, fmt.Errorf("sandboxtest: %w", err)
	}
	return ev, nil
}

// Emit publishes an event and delivers everything due (Flush): when it returns, the consumer has
// answered the delivery (and its retries), unless a fault dropped it.
func (p *Producer) Emit(ctx context.Context, eventType string, data any) (webhook.Event, error) {
	ev, err := p.Publish(ctx, eventType, data)
	if err != nil {
		return webhook.Event{}, err
	}
	return ev, p.Flush(ctx)
}

// Flush delivers every pending event, retrying deliveries the consumer fails at once (up to
// Options.Retries), and then sends the deliveries a reorder fault still holds. A delivery that
// exhausts its retries is abandoned; it stays retrievable by range.
func (p *Producer) Flush(ctx context.Context) error {
	if p == nil || p.srv == nil {
		return ErrNotBuilt
	}
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	for range maxPasses {
		st, err := p.disp.DeliverDue(ctx)
		if err != nil {
			return fmt.Errorf("sandboxtest: %w", err)
		}
		p.mu.Lock()
		p.stats.Claimed += st.Claimed
		p.stats.Delivered += st.Delivered
		p.stats.Failed += st.Failed
		p.stats.Abandoned += st.Abandoned
		p.stats.Released += st.Released
		p.mu.Unlock()
		if st.Claimed == 0 {
			p.transport.Flush()
			return nil
		}
		if st.Failed > 0 || st.Released > 0 {
			p.offset.Add(int64(retryStep))
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return errors.New("sandboxtest: Flush did not settle")
}

// SetFaults replaces the endpoint's webhook faults; the zero Faults clears them.
func (p *Producer) SetFaults(f sandbox.Faults) error {
	if p == nil || p.srv == nil {
		return ErrNotBuilt
	}
	return p.faults.Set(p.EndpointID, f)
}

// AppliedFaults returns the faults applied so far, in the order they were applied.
func (p *Producer) AppliedFaults() []sandbox.FaultEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.applied)
}

// Stats returns what the delivery passes have done so far, added up.
func (p *Producer) Stats() producer.Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Events returns the endpoint's events from sequence 1 on, as range retrieval serves them.
func (p *Producer) Events(ctx context.Context) ([]webhook.Event, error) {
	if p == nil || p.srv == nil {
		return nil, ErrNotBuilt
	}
	var out []webhook.Event
	for from := uint64(1); ; {
		evs, more, err := p.log.Range(ctx, p.EndpointID, from, ^uint64(0), producer.MaxRangeLimit)
		if err != nil {
			return nil, fmt.Errorf("sandboxtest: %w", err)
		}
		out = append(out, evs...)
		if !more || len(evs) == 0 {
			return out, nil
		}
		from = evs[len(evs)-1].Sequence + 1
	}
}

// Close sends any held deliveries and stops the server. NewProducer registers it with t.Cleanup;
// calling it again is harmless.
func (p *Producer) Close() {
	if p == nil || p.srv == nil {
		return
	}
	_ = p.transport.Close() // ErrTransportClosed on a second call: nothing left to do
	p.srv.Close()
}

// The sandbox control hooks: the test producer's API behaves like the real sandbox's.

func (p *Producer) owns(pr apikey.Principal, endpointID string) bool {
	return pr.Licensee == p.Licensee && endpointID == p.EndpointID
}

func (p *Producer) trigger(ctx context.Context, pr apikey.Principal, req sandbox.TriggerRequest) ([]sandbox.Triggered, error) {
	if pr.Licensee != p.Licensee || (req.Endpoint != "" && req.Endpoint != p.EndpointID) {
		return nil, sandbox.ErrUnknownEndpoint
	}
	ev, err := p.Emit(ctx, req.Type, req.Data)
	if err != nil {
		return nil, err
	}
	return []sandbox.Triggered{{Endpoint: p.EndpointID, Event: ev}}, nil
}

func (p *Producer) setFaults(_ context.Context, pr apikey.Principal, endpointID string, f sandbox.Faults) error {
	if !p.owns(pr, endpointID) {
		return sandbox.ErrUnknownEndpoint
	}
	return p.faults.Set(endpointID, f)
}

// reset clears the faults: the test producer's only other data is its event stream, which keeps its
// sequence so that a consumer's cursor stays valid.
func (p *Producer) reset(_ context.Context, pr apikey.Principal) error {
	if pr.Licensee == p.Licensee {
		p.faults.Clear(p.EndpointID)
	}
	return nil
}
