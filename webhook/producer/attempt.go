package producer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/svcplatform/conventions/internal/retryafter"
	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/webhook/producer/driver"

	"github.com/svcplatform/conventions/webhook"
)

// result is one request of a window: what is sent and what became of it.
type result struct {
	body      []byte
	sig       string
	cancelled bool // cut short by the dispatcher's own shutdown: no attempt counts
	sent      bool // the request was handed to the client
	// pause is how long the endpoint asked us to wait (Retry-After on a 429 or 503), capped at
	// MaxRetryAfter; 0 when it did not.
	pause time.Duration
	held  time.Time // recordFailure held the endpoint back until then for the pause; zero: not
	driver.Attempt
}

// prepare renders and signs one delivery: the body and its X-SVC-Signature, or, as a failed Attempt,
// why it cannot be sent.
func (d *Dispatcher) prepare(ctx context.Context, ep Endpoint, dl driver.Delivery) (body []byte, sig string, fail driver.Attempt) {
	body, err := encodeEvent(ctx, d.render, ep, dl.Event)
	if err != nil {
		d.logger.ErrorContext(ctx, "producer: cannot render event", "endpoint", ep.ID, "sequence", dl.Sequence, "error", err)
		return nil, "", driver.Attempt{Class: ClassRender, Reason: "render failed"}
	}
	signer, err := d.signers.get(ep.ID, ep.SigningSecrets(d.now()))
	if err == nil {
		sig, err = signer.Sign(body, d.now())
	}
	if err != nil {
		return nil, "", driver.Attempt{Class: ClassNoSecret, Reason: "no signing secret"}
	}
	return body, sig, driver.Attempt{}
}

// attempt makes one delivery request (unless prepare already failed it) and fills in r's Attempt.
func (d *Dispatcher) attempt(ctx context.Context, ep Endpoint, dl driver.Delivery, r *result) {
	o := d.hooks
	if o != nil {
		ctx = o.attemptStart(ctx, attemptInfo(dl))
	}
	start := d.now()
	if r.Class == "" {
		r.Attempt, r.pause, r.sent = d.send(ctx, ep, dl, r.body, r.sig)
		r.cancelled = r.Class != "" && ctx.Err() != nil
	}
	r.At = start
	r.Latency = max(d.now().Sub(start), 0)
	if o != nil {
		o.attemptEnd(ctx, d.attemptResult(dl, r))
	}
}

// attemptInfo describes dl's next attempt for the hooks.
func attemptInfo(dl driver.Delivery) AttemptInfo {
	return AttemptInfo{Endpoint: dl.Stream, EventID: dl.Event.ID, EventType: dl.Event.Type, Sequence: dl.Sequence,
		Attempt: dl.Attempts + 1, Trace: TraceContext{TraceParent: dl.TraceParent, TraceState: dl.TraceState}}
}

// attemptResult describes r for the hooks. The outcome is decided here as deliverStream will
// record it: a failure is retried unless it exhausted the schedule (retryAt's rule).
func (d *Dispatcher) attemptResult(dl driver.Delivery, r *result) AttemptResult {
	res := AttemptResult{Endpoint: dl.Stream, EventType: dl.Event.Type, Sent: r.sent, StatusCode: r.StatusCode,
		Class: r.Class, Duration: r.Latency}
	switch {
	case r.cancelled:
		res.Released = true
	case r.Class == "":
		res.Outcome = driver.OutcomeDelivered
	case dl.Attempts+1 > len(d.schedule):
		res.Outcome = driver.OutcomeAbandoned
	default:
		res.Outcome = driver.OutcomeFailed
	}
	return res
}

// send makes one delivery request and describes its outcome; Class is empty on success. pause is
// the wait a 429 or 503 asked for with Retry-After, capped at MaxRetryAfter. sent reports whether
// the request reached the client.
func (d *Dispatcher) send(ctx context.Context, ep Endpoint, dl driver.Delivery, body []byte, sig string) (a driver.Attempt, pause time.Duration, sent bool) {
	rctx, cancel := context.WithTimeout(NewEndpointIDContext(ctx, ep.ID), d.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, ep.URL, bytes.NewReader(body))
	if err != nil {
		return driver.Attempt{Class: ClassInvalidURL, Reason: "invalid endpoint URL"}, 0, false
	}
	h := req.Header
	// The endpoint's own headers first: none may be one of those below (driver.Endpoint.Headers).
	for k, v := range ep.Headers {
		h.Set(k, v)
	}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", d.userAgent)
	h.Set(webhook.HeaderSignature, sig)
	h.Set(webhook.HeaderSequence, strconv.FormatUint(dl.Sequence, 10))
	if dl.Redelivery {
		h.Set(webhook.HeaderRedelivery, "true")
	}
	if o := d.hooks; o != nil {
		o.injectTrace(rctx, webhook.NewTraceCarrier(h))
	}
	// Whether the connection (new or reused) is one that only an allow-list admitted: its answer is
	// then not recorded. Atomic: a transport may report the connection from another goroutine.
	var internal atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(rctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if info.Conn != nil && ssrf.AllowListed(info.Conn) {
				internal.Store(true)
			}
		},
	}))
	client := d.client
	if d.clientFor != nil {
		if c := d.clientFor(ep); c != nil {
			client = c
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return transportFailure(rctx, err), 0, true
	}
	var snip [maxResponseSnippet]byte
	n, _ := io.ReadFull(resp.Body, snip[:])
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	_ = resp.Body.Close()
	if internal.Load() {
		n = 0 // its status only: see Dispatcher
	}
	a = driver.Attempt{StatusCode: resp.StatusCode, Response: snippet(snip[:n])}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		a.Class, a.Reason = ClassStatus, "status "+strconv.Itoa(resp.StatusCode)
	}
	if (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) && d.maxRetryAfter > 0 {
		if wait, ok := retryafter.Parse(resp.Header.Get("Retry-After"), d.now()); ok {
			pause = min(wait, d.maxRetryAfter)
		}
	}
	return a, pause, true
}

// snippet returns b as a string cut to whole UTF-8 characters, with invalid bytes replaced, so that the
// history stores text whatever the endpoint sent.
func snippet(b []byte) string {
	if len(b) == maxResponseSnippet {
		// The cut may have split a character: drop its leading bytes.
		for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
			if utf8.RuneStart(b[i]) {
				if !utf8.FullRune(b[i:]) {
					b = b[:i]
				}
				break
			}
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// transportFailure describes a failed request without the URL, which may carry a token in its query.
func transportFailure(rctx context.Context, err error) driver.Attempt {
	if errors.Is(rctx.Err(), context.DeadlineExceeded) {
		return driver.Attempt{Class: ClassTimeout, Reason: "timeout"}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var (
		ne net.Error
		be *ssrf.BlockedError
	)
	switch {
	case errors.As(err, &be):
		// Only the class: the resolved address would tell the endpoint's owner about our network.
		return driver.Attempt{Class: ClassBlockedAddress, Reason: "request refused: blocked address (" + be.Class + ")"}
	case errors.Is(err, ssrf.ErrBlocked):
		return driver.Attempt{Class: ClassBlockedAddress, Reason: "request refused: blocked address"}
	case errors.As(err, &ne) && ne.Timeout():
		return driver.Attempt{Class: ClassTimeout, Reason: "timeout"}
	}
	return driver.Attempt{Class: ClassConnection, Reason: "request failed: " + err.Error()}
}

type endpointIDKey struct{}

// NewEndpointIDContext returns a context carrying a webhook endpoint ID, as every delivery request's context
// does.
func NewEndpointIDContext(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, endpointIDKey{}, id)
}

// EndpointIDFromContext returns the webhook endpoint ID a delivery request is for. Transports (the
// sandbox's fault injector, per-endpoint metrics) call it on the request's context.
func EndpointIDFromContext(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(endpointIDKey{}).(string)
	return id, ok
}
