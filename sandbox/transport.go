package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
)

// Fault names one fault a FaultTransport applied.
type Fault string

// The faults, as reported to FaultTransportOptions.OnFault and in the X-SVC-Sandbox-Fault header of
// the responses the transport makes up.
const (
	FaultDrop         Fault = "drop"
	FaultDuplicate    Fault = "duplicate"
	FaultReorder      Fault = "reorder"
	FaultBadSignature Fault = "bad_signature"
	FaultDelay        Fault = "delay"
)

// HeaderSandboxFault marks a response the FaultTransport made up instead of sending the delivery.
const HeaderSandboxFault = "X-SVC-Sandbox-Fault"

// Defaults of FaultTransportOptions.
const (
	DefaultHoldFor     = 5 * time.Second
	DefaultSendTimeout = 30 * time.Second
)

// FaultEvent describes one fault applied to one delivery. It is a plain value; the zero FaultEvent
// names no endpoint and no fault.
type FaultEvent struct {
	EndpointID string
	// Sequence is the delivery's X-SVC-Sequence, or 0 when it had none.
	Sequence uint64
	Fault    Fault
}

// FaultTransportOptions tune a FaultTransport. A nil *FaultTransportOptions and the zero value mean
// the defaults.
type FaultTransportOptions struct {
	// EndpointOf names the webhook endpoint a request delivers to, or reports false for a request
	// that is not a delivery (those pass through untouched). Nil means the endpoint the
	// producer.Dispatcher tags each delivery's context with (producer.EndpointIDFromContext); another
	// producer plugs its own accessor in here.
	EndpointOf func(*http.Request) (string, bool)
	// Rand draws the faults; nil means an unseeded generator. Pass rand.New(rand.NewPCG(1, 2)) for a
	// reproducible run. The transport serializes its use.
	Rand *rand.Rand
	// HoldFor is the longest a reordered delivery waits for the endpoint's next one before it is sent
	// anyway; zero means DefaultHoldFor.
	HoldFor time.Duration
	// SendTimeout bounds the sending of a held delivery, whose producer has already had its answer;
	// zero means DefaultSendTimeout.
	SendTimeout time.Duration
	// OnFault, when set, is called for every fault applied (from the goroutine of the RoundTrip).
	OnFault func(FaultEvent)
	// Logger records faults at Debug and failed sends of held deliveries at Warn; nil logs nothing.
	Logger *slog.Logger
}

// FaultTransport is an http.RoundTripper for a webhook producer's client that injects the faults a
// FaultSource sets per endpoint: drop (answer 200 without sending), duplicate (send twice), reorder
// (hold the delivery and send it after the endpoint's next one), delay, and bad signature (corrupt
// every v1 of X-SVC-Signature). It reads each delivery's body into memory to replay or hold it.
//
// Held deliveries are sent after the endpoint's next delivery, when HoldFor ends, or on Close, so
// nothing is held forever; Close stops the timers and sends what is still held. A FaultTransport is
// safe for concurrent use. Build one with NewFaultTransport; the zero value is not usable: its
// RoundTrip and Close return ErrNotBuilt, and its Flush has nothing to send.
type FaultTransport struct {
	base        http.RoundTripper
	source      FaultSource
	endpointOf  func(*http.Request) (string, bool)
	holdFor     time.Duration
	sendTimeout time.Duration
	onFault     func(FaultEvent)
	log         *slog.Logger

	randMu sync.Mutex
	rnd    *rand.Rand

	mu     sync.Mutex
	queues map[string]*endpointQueue
	idle   *sync.Cond // on mu: signalled when a queue stops sending
	closed bool
	done   chan struct{} // closed by Close: wakes delayed deliveries
}

// endpointQueue holds one endpoint's reordered deliveries. Released ones move to outbox, which one
// sender at a time drains in order, so that two releases racing (a timer and the next delivery) can
// never swap the deliveries they send.
type endpointQueue struct {
	held    []*heldDelivery // waiting for the endpoint's next delivery or the hold timer
	outbox  []*heldDelivery // released, to be sent in this order
	sending bool
}

type heldDelivery struct {
	req   *http.Request // detached from the producer's context; body replayable
	ev    FaultEvent
	timer *time.Timer
}

var _ http.RoundTripper = (*FaultTransport)(nil)

// NewFaultTransport returns a transport that sends through base (nil means http.DefaultTransport)
// with the faults source gives each endpoint. A nil source is an error.
func NewFaultTransport(base http.RoundTripper, source FaultSource, opts *FaultTransportOptions) (*FaultTransport, error) {
	if source == nil {
		return nil, errors.New("sandbox: NewFaultTransport needs a FaultSource")
	}
	if base == nil {
		base = http.DefaultTransport
	}
	t := &FaultTransport{base: base, source: source, endpointOf: dispatcherEndpoint,
		holdFor: DefaultHoldFor, sendTimeout: DefaultSendTimeout,
		queues: make(map[string]*endpointQueue), done: make(chan struct{})}
	t.idle = sync.NewCond(&t.mu)
	if opts != nil {
		if opts.EndpointOf != nil {
			t.endpointOf = opts.EndpointOf
		}
		if opts.HoldFor > 0 {
			t.holdFor = opts.HoldFor
		}
		if opts.SendTimeout > 0 {
			t.sendTimeout = opts.SendTimeout
		}
		t.rnd, t.onFault, t.log = opts.Rand, opts.OnFault, opts.Logger
	}
	return t, nil
}

// dispatcherEndpoint is the default EndpointOf: the endpoint producer.Dispatcher put in the delivery's
// context. A request without one, or with an empty one, is not a delivery.
func dispatcherEndpoint(r *http.Request) (string, bool) {
	id, ok := producer.EndpointIDFromContext(r.Context())
	return id, ok && id != ""
}

// draws are taken five at a time, whatever the outcome, so that a seeded run is reproducible even
// when the rates change between deliveries.
type draws struct{ drop, dup, reorder, badSig, delay float64 }

func (t *FaultTransport) draw() draws {
	t.randMu.Lock()
	defer t.randMu.Unlock()
	f := rand.Float64
	if t.rnd != nil {
		f = t.rnd.Float64
	}
	return draws{drop: f(), dup: f(), reorder: f(), badSig: f(), delay: f()}
}

// RoundTrip implements http.RoundTripper.
func (t *FaultTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t == nil || t.done == nil {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, errZeroFaultTransport
	}
	id, ok := t.endpointOf(req)
	if !ok {
		return t.base.RoundTrip(req)
	}
	f := t.source.FaultsFor(id)
	if f.IsZero() && !t.hasHeld(id) {
		return t.base.RoundTrip(req)
	}
	d := t.draw()
	seq, _ := strconv.ParseUint(req.Header.Get(webhook.HeaderSequence), 10, 64)
	ev := FaultEvent{EndpointID: id, Sequence: seq}

	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	if d.drop < f.Drop {
		t.report(ev, FaultDrop)
		t.flush(id)
		return fakeResponse(req, FaultDrop), nil
	}
	out := replayable(req.Context(), req, body)
	if d.badSig < f.BadSignature {
		out.Header.Set(webhook.HeaderSignature, corruptSignature(req.Header.Get(webhook.HeaderSignature)))
		t.report(ev, FaultBadSignature)
	}
	if d.delay < f.Delay && f.DelayMS > 0 {
		t.report(ev, FaultDelay)
		if err := t.wait(req.Context(), time.Duration(min(f.DelayMS, MaxFaultDelay.Milliseconds()))*time.Millisecond); err != nil {
			return nil, err
		}
	}
	if d.reorder < f.Reorder && t.hold(id, out, ev) {
		t.report(ev, FaultReorder)
		return fakeResponse(req, FaultReorder), nil
	}
	resp, err := t.base.RoundTrip(out)
	if err == nil && d.dup < f.Duplicate {
		t.report(ev, FaultDuplicate)
		drain(resp)
		resp, err = t.base.RoundTrip(replayable(req.Context(), out, body)) // a corrupted signature stays corrupted
	}
	t.flush(id)
	return resp, err
}

func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	return io.ReadAll(req.Body)
}

// replayable clones req onto ctx with a body that can be sent again.
func replayable(ctx context.Context, req *http.Request, body []byte) *http.Request {
	out := req.Clone(ctx)
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.ContentLength = int64(len(body))
	return out
}

// fakeResponse is the producer's answer for a delivery the transport did not send (dropped) or sends
// later (reordered). Its body says so, and the producer's delivery history keeps the start of every
// answer, so an evaluator reading the history sees the fault instead of a plain success.
func fakeResponse(req *http.Request, f Fault) *http.Response {
	h := make(http.Header, 2)
	h.Set(HeaderSandboxFault, string(f))
	h.Set("Content-Type", "text/plain; charset=utf-8")
	body := faultNotes[f]
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req,
	}
}

// faultNotes are the bodies of fakeResponse.
var faultNotes = map[Fault]string{
	FaultDrop:    "sandbox fault drop: this delivery was not sent to the endpoint",
	FaultReorder: "sandbox fault reorder: this delivery is held back and sent after a later one",
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

// corruptSignature keeps the header's shape (so the consumer's parser accepts it) and flips one hex
// digit of every v1, so that no signature verifies.
func corruptSignature(h string) string {
	if h == "" {
		return "t=0,v1=" + strings.Repeat("0", 64)
	}
	parts := strings.Split(h, ",")
	found := false
	for i, p := range parts {
		if v, ok := strings.CutPrefix(p, "v1="); ok && v != "" {
			b := []byte(v)
			last := len(b) - 1
			if b[last] == '0' {
				b[last] = '1'
			} else {
				b[last] = '0'
			}
			parts[i] = "v1=" + string(b)
			found = true
		}
	}
	if !found {
		parts = append(parts, "v1="+strings.Repeat("0", 64))
	}
	return strings.Join(parts, ",")
}

func (t *FaultTransport) report(ev FaultEvent, f Fault) {
	ev.Fault = f
	if t.log != nil {
		t.log.Debug("sandbox: webhook fault injected", "endpoint", ev.EndpointID, "sequence", ev.Sequence, "fault", string(f))
	}
	if t.onFault != nil {
		t.onFault(ev)
	}
}

func (t *FaultTransport) wait(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-t.done:
		return nil // closing: send now rather than strand the delivery
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *FaultTransport) hasHeld(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.queues[id] != nil
}

// hold parks a delivery until the endpoint's next one is sent or HoldFor ends. It reports false after
// Close, when the delivery must go out now. The held request gets its own context: the producer
// cancels the original as soon as it has the made-up answer.
func (t *FaultTransport) hold(id string, req *http.Request, ev FaultEvent) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	q := t.queues[id]
	if q == nil {
		q = &endpointQueue{}
		t.queues[id] = q
	}
	h := &heldDelivery{req: req.WithContext(context.WithoutCancel(req.Context())), ev: ev}
	h.timer = time.AfterFunc(t.holdFor, func() { t.flush(id) })
	q.held = append(q.held, h)
	return true
}

// flush releases the endpoint's held deliveries and, unless another goroutine is already sending
// them, sends everything released, in order, before it returns.
func (t *FaultTransport) flush(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.queues[id]
	if q == nil {
		return
	}
	for _, h := range q.held {
		h.timer.Stop()
	}
	q.outbox = append(q.outbox, q.held...)
	q.held = nil
	if q.sending {
		return // the active sender picks them up, after what it is sending now
	}
	q.sending = true
	for len(q.outbox) > 0 {
		batch := q.outbox
		q.outbox = nil
		t.mu.Unlock()
		for _, h := range batch {
			t.send(h)
		}
		t.mu.Lock()
	}
	q.sending = false
	if len(q.held) == 0 {
		delete(t.queues, id)
	}
	t.idle.Broadcast()
}

func (t *FaultTransport) send(h *heldDelivery) {
	ctx, cancel := context.WithTimeout(h.req.Context(), t.sendTimeout)
	defer cancel()
	resp, err := t.base.RoundTrip(h.req.WithContext(ctx))
	if err != nil {
		if t.log != nil {
			t.log.Warn("sandbox: sending a held webhook delivery failed", "endpoint", h.ev.EndpointID,
				"sequence", h.ev.Sequence, "error", err)
		}
		return
	}
	drain(resp)
}

// Flush sends every held delivery now, each endpoint's in the order they were held, and returns when
// they, and any held deliveries already being sent, are out. A test calls it instead of waiting for
// HoldFor.
func (t *FaultTransport) Flush() {
	if t == nil || t.done == nil {
		return // nothing was ever held
	}
	t.mu.Lock()
	ids := make([]string, 0, len(t.queues))
	for id := range t.queues {
		ids = append(ids, id)
	}
	t.mu.Unlock()
	for _, id := range ids {
		t.flush(id)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.busy() {
		t.idle.Wait()
	}
}

// busy reports whether some endpoint's released deliveries are still being sent. The caller holds mu.
func (t *FaultTransport) busy() bool {
	for _, q := range t.queues {
		if q.sending {
			return true
		}
	}
	return false
}

// ErrTransportClosed is returned by Close when called twice.
var ErrTransportClosed = errors.New("sandbox: fault transport already closed")

// Close stops the hold timers, sends every delivery still held, and waits until every held delivery
// is out. Deliveries waiting out a delay are sent at once. Later reordered deliveries are sent
// instead of held.
func (t *FaultTransport) Close() error {
	if t == nil || t.done == nil {
		return errZeroFaultTransport
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return ErrTransportClosed
	}
	t.closed = true
	close(t.done)
	t.mu.Unlock()
	t.Flush()
	return nil
}
