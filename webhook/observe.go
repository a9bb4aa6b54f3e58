package webhook

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/svcplatform/conventions/apierror"
)

// Hooks are told what the consumer side decides, so that metrics and traces can be kept without
// this package depending on any telemetry library (package otelconv fills them with OpenTelemetry).
// Each type reports what it decides itself, to the Hooks of its own options:
//
//   - a Verifier (VerifierOptions.Hooks): every verification and its result — Verify and VerifyTime
//     calls, the Receiver's, and the RangeClient's checks of range responses;
//   - a Receiver (ReceiverOptions.Hooks): each delivery, from its arrival to its answer;
//   - a Tracker (TrackerOptions.Hooks): each application of the sequence rule;
//   - a RangeClient (RangeClientOptions.Hooks): each FetchRange call and the requests it sends.
//
// Pass the same Hooks to all four to see everything. Every field may be nil; the zero value observes
// nothing, and a nil *Hooks observes nothing at no cost. Fields will be added as the package grows:
// Hooks written for an earlier version keep compiling and keep working, since a new field is nil in
// them. A Hooks value must not be modified once in use.
//
// The hooks are called synchronously on the delivery's path, from many goroutines at once: they must
// be safe for concurrent use and must not block. No hook is given a secret, a signature or an API
// key. The stream (webhook endpoint ID) is given where known; it is of unbounded cardinality in
// general, and an implementation should not make it a metric attribute by default.
//
// Spans follow the pattern of pgx's tracers: XStart returns the context the work goes on in (a
// tracing implementation puts its span there), and the matching XEnd gets that context back.
type Hooks struct {
	// Verified is called once per verification, with its result, after the signature and timestamp
	// were checked. Verify and VerifyTime have no context of their own and pass context.Background;
	// the Receiver and the RangeClient pass the delivery's or the fetch's.
	Verified func(ctx context.Context, info VerifyInfo)

	// ReceiveStart is called when a delivery reaches a Receiver (ServeHTTP or Receive), before
	// anything is read. It returns the context the delivery is handled in; a tracing
	// implementation continues the producer's trace there, from info.Trace.
	ReceiveStart func(ctx context.Context, info ReceiveStartInfo) context.Context
	// ReceiveEnd is called once for each delivery ReceiveStart saw, with the context it returned,
	// when the answer is decided.
	ReceiveEnd func(ctx context.Context, info ReceiveEndInfo)

	// Sequenced is called each time a Tracker applies the sequence rule to a delivered event, with
	// the rule's verdict, before the fetch and processing it calls for: whether those succeeded is in
	// ReceiveEnd (a 503) and RangeFetchEnd. A delivery that loses a race for the cursor to another
	// process is decided again, and reported again.
	Sequenced func(ctx context.Context, info SequenceInfo)

	// RangeFetchStart is called when a RangeClient's FetchRange starts. It returns the context the
	// fetch goes on in; a tracing implementation starts the fetch's span there.
	RangeFetchStart func(ctx context.Context, info RangeFetchStartInfo) context.Context
	// InjectTrace is called for each range request with the context RangeFetchStart returned, so
	// that the request carries the fetch's trace context (W3C traceparent, say) to the producer.
	InjectTrace func(ctx context.Context, carrier TraceCarrier)
	// RangeFetchEnd is called once for each fetch, with the context RangeFetchStart returned.
	RangeFetchEnd func(ctx context.Context, info RangeFetchEndInfo)
}

// The hooks' calls, each a no-op when its field is nil; the caller has checked that h is not nil.

func (h *Hooks) verified(ctx context.Context, info VerifyInfo) {
	if h.Verified != nil {
		h.Verified(ctx, info)
	}
}

func (h *Hooks) receiveStart(ctx context.Context, info ReceiveStartInfo) context.Context {
	if h.ReceiveStart == nil {
		return ctx
	}
	return h.ReceiveStart(ctx, info)
}

func (h *Hooks) receiveEnd(ctx context.Context, info ReceiveEndInfo) {
	if h.ReceiveEnd != nil {
		h.ReceiveEnd(ctx, info)
	}
}

func (h *Hooks) sequenced(ctx context.Context, info SequenceInfo) {
	if h.Sequenced != nil {
		h.Sequenced(ctx, info)
	}
}

func (h *Hooks) rangeFetchStart(ctx context.Context, info RangeFetchStartInfo) context.Context {
	if h.RangeFetchStart == nil {
		return ctx
	}
	return h.RangeFetchStart(ctx, info)
}

func (h *Hooks) injectTrace(ctx context.Context, carrier TraceCarrier) {
	if h.InjectTrace != nil {
		h.InjectTrace(ctx, carrier)
	}
}

func (h *Hooks) rangeFetchEnd(ctx context.Context, info RangeFetchEndInfo) {
	if h.RangeFetchEnd != nil {
		h.RangeFetchEnd(ctx, info)
	}
}

// VerifyResult is the result of one verification: which of the package's verification errors, if
// any, it returned. The zero value is VerifyUnknown, which no Verifier reports.
type VerifyResult uint8

// Results of a verification, one per verification error sentinel.
const (
	VerifyUnknown   VerifyResult = iota
	VerifyOK                     // the signature matches and its timestamp is within the tolerance
	VerifyMissing                // ErrMissingHeader
	VerifyMalformed              // ErrMalformedHeader and the errors that wrap it
	VerifyMismatch               // ErrSignatureMismatch
	VerifyTooOld                 // ErrTooOld
	VerifyTooNew                 // ErrTooNew
)

var verifyResultNames = [...]string{"unknown", "ok", "missing", "malformed", "mismatch", "too_old", "too_new"}

// String returns the result in snake_case: "ok", "missing", "malformed", "mismatch", "too_old",
// "too_new" (and "unknown").
func (r VerifyResult) String() string {
	if int(r) < len(verifyResultNames) {
		return verifyResultNames[r]
	}
	return "unknown"
}

// verifyResultOf classifies an error of verify.
func verifyResultOf(err error) VerifyResult {
	switch {
	case err == nil:
		return VerifyOK
	case errors.Is(err, ErrMissingHeader):
		return VerifyMissing
	case errors.Is(err, ErrMalformedHeader):
		return VerifyMalformed
	case errors.Is(err, ErrSignatureMismatch):
		return VerifyMismatch
	case errors.Is(err, ErrTooOld):
		return VerifyTooOld
	case errors.Is(err, ErrTooNew):
		return VerifyTooNew
	}
	return VerifyUnknown
}

// VerifyInfo describes one verification. It is a plain value; the zero value (VerifyUnknown of a
// delivery) is never reported.
type VerifyInfo struct {
	Result VerifyResult
	// RangeResponse is true when a RangeClient checked a range response's body, and false when a
	// delivery's body was checked, by a Receiver or by a Verify or VerifyTime call.
	RangeResponse bool
}

// TraceCarrier gives hooks the headers of a delivery (to read trace context from) or of a range
// request (to write it into), without the credentials beside them: Get, Set and Keys skip
// X-SVC-Signature, Authorization, Proxy-Authorization, Cookie and Set-Cookie. Its methods are those
// of OpenTelemetry's propagation.TextMapCarrier, so it can be handed to a propagator as it is.
//
// A TraceCarrier is a view of the header map and is valid only during the call it is passed to; it is
// not safe for concurrent use. The zero value carries nothing: Get returns "", Keys nil, and Set does
// nothing.
type TraceCarrier struct {
	h http.Header
}

// NewTraceCarrier returns a TraceCarrier over h: for the producer's hooks, which show delivery and
// range requests the same way, and for tests of hooks.
func NewTraceCarrier(h http.Header) TraceCarrier { return TraceCarrier{h: h} }

// hiddenHeader reports whether key names a header a TraceCarrier never shows or writes.
func hiddenHeader(key string) bool {
	for _, k := range [...]string{HeaderSignature, "Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie"} {
		if strings.EqualFold(key, k) {
			return true
		}
	}
	return false
}

// Get returns the first value of the header key (case-insensitive), or "".
func (c TraceCarrier) Get(key string) string {
	if c.h == nil || hiddenHeader(key) {
		return ""
	}
	return c.h.Get(key)
}

// Set sets the header key to value, replacing any value it had. It does nothing for a hidden header
// or on the zero TraceCarrier.
func (c TraceCarrier) Set(key, value string) {
	if c.h == nil || hiddenHeader(key) {
		return
	}
	c.h.Set(key, value)
}

// Keys returns the names of the headers, the hidden ones left out.
func (c TraceCarrier) Keys() []string {
	if len(c.h) == 0 {
		return nil
	}
	keys := make([]string, 0, len(c.h))
	for k := range c.h {
		if !hiddenHeader(k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// ReceiveStartInfo describes a delivery as it reaches a Receiver. It is a plain value; the zero
// value names no stream and carries no trace context.
type ReceiveStartInfo struct {
	// Stream is the Receiver's webhook endpoint ID.
	Stream string
	// Trace is the delivery's headers, for the trace context the producer sent with it. Receive,
	// which has no headers, passes the zero TraceCarrier: the trace goes on from ctx.
	Trace TraceCarrier
}

// ReceiveEndInfo describes a Receiver's answer to a delivery. It is a plain value; the zero value
// (status 0) is never reported.
type ReceiveEndInfo struct {
	// Stream is the Receiver's webhook endpoint ID.
	Stream string
	// Status is the HTTP status of the answer: 200, or the problem's (400, 401, 405, 413, 503, or
	// 500 for an unexpected error). Receive reports the status ServeHTTP would answer with.
	Status int
	// Code is the problem's code (signature_mismatch, delivery_not_stored, …), "" for a 200. Codes
	// are a small fixed set.
	Code string
	// Outcome, Sequence and Recovered are those of the Result of a 200, zero otherwise.
	Outcome   Outcome
	Sequence  uint64
	Recovered int
	// Duration is the time from ReceiveStart to the answer, measured with the Verifier's clock
	// (VerifierOptions.Now); for ServeHTTP, the body's reading included.
	Duration time.Duration
}

// receiveEnd reports the end of a delivery that started at start to o.
func (rc *Receiver) receiveEnd(ctx context.Context, o *Hooks, start time.Time, res Result, err error) {
	info := ReceiveEndInfo{Stream: rc.stream, Status: http.StatusOK, Outcome: res.Outcome, Sequence: res.Sequence,
		Recovered: res.Recovered, Duration: rc.verifier.now().Sub(start)}
	if err != nil {
		info.Status, info.Outcome = http.StatusInternalServerError, 0
		// The Receiver's errors are *apierror.Error as they are: a type assertion finds them without
		// the allocation errors.As would cost.
		p, ok := err.(*apierror.Error)
		if !ok {
			p = asProblem(err)
		}
		if p != nil && p.Status >= 400 && p.Status <= 599 {
			info.Status, info.Code = p.Status, p.Code
		}
	}
	o.receiveEnd(ctx, info)
}

// asProblem returns the *apierror.Error in err's chain, or nil.
func asProblem(err error) *apierror.Error {
	var p *apierror.Error
	if errors.As(err, &p) {
		return p
	}
	return nil
}

// SequenceInfo describes one application of the sequence rule. It is a plain value; the zero value
// (an unknown Outcome) is never reported.
type SequenceInfo struct {
	// Stream is the stream (webhook endpoint ID) the event was delivered on.
	Stream string
	// Sequence is the delivered event's sequence.
	Sequence uint64
	// Cursor is the stream's cursor as the rule read it: the last sequence processed, 0 for none.
	Cursor uint64
	// Outcome is the rule's verdict: Processed, Duplicate or Gap.
	Outcome Outcome
	// Missing is, for Gap, how many events are missing before the delivered one; 0 otherwise.
	Missing uint64
}

// RangeFetchResult classifies how a FetchRange call ended. The zero value is RangeFetchUnknown, which
// no RangeClient reports.
type RangeFetchResult uint8

const (
	RangeFetchUnknown RangeFetchResult = iota
	// RangeFetchOK: the events were fetched and checked.
	RangeFetchOK
	// RangeFetchTooLarge: over the byte budget (ErrRangeTooLarge); a Tracker asks for fewer events.
	RangeFetchTooLarge
	// RangeFetchSignature: a response's X-SVC-Signature did not verify.
	RangeFetchSignature
	// RangeFetchInvalid: any other invalid response (ErrRangeResponse): not an event list, events
	// out of range or order, a page without progress, a non-2xx answer that is not a problem.
	RangeFetchInvalid
	// RangeFetchProblem: the producer answered with a problem (RangeFetchEndInfo.Status has its
	// status).
	RangeFetchProblem
	// RangeFetchTransport: the request could not be sent or its response read.
	RangeFetchTransport
	// RangeFetchCanceled: the context was cancelled or its deadline passed.
	RangeFetchCanceled
)

var rangeFetchResultNames = [...]string{"unknown", "ok", "too_large", "signature", "invalid_response", "problem", "transport", "canceled"}

// String returns the result in snake_case: "ok", "too_large", "signature", "invalid_response",
// "problem", "transport", "canceled" (and "unknown").
func (r RangeFetchResult) String() string {
	if int(r) < len(rangeFetchResultNames) {
		return rangeFetchResultNames[r]
	}
	return "unknown"
}

// rangeFetchResultOf classifies an error of FetchRange made under ctx.
func rangeFetchResultOf(ctx context.Context, err error) RangeFetchResult {
	switch {
	case err == nil:
		return RangeFetchOK
	case ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return RangeFetchCanceled
	case errors.Is(err, ErrRangeTooLarge):
		return RangeFetchTooLarge
	case verifyResultOf(err) != VerifyUnknown:
		return RangeFetchSignature
	case errors.Is(err, ErrRangeResponse):
		return RangeFetchInvalid
	case asProblem(err) != nil:
		return RangeFetchProblem
	}
	return RangeFetchTransport
}

// RangeFetchStartInfo describes a FetchRange call as it starts. It is a plain value; the zero value
// names no stream.
type RangeFetchStartInfo struct {
	// Stream is the stream (webhook endpoint ID) whose events are fetched.
	Stream string
	// From and To are the sequences asked for, inclusive.
	From, To uint64
}

// RangeFetchEndInfo describes how a FetchRange call ended. It is a plain value; the zero value
// (RangeFetchUnknown) is never reported.
type RangeFetchEndInfo struct {
	// Stream is the stream (webhook endpoint ID) whose events were fetched.
	Stream string
	Result RangeFetchResult
	// Status is the HTTP status of the last response, 0 when none was received.
	Status int
	// Events is how many events were returned (0 on failure); Pages how many requests were sent;
	// Bytes the size of the response bodies read.
	Events, Pages int
	Bytes         int64
	// Duration is the call's duration, measured with the Verifier's clock (VerifierOptions.Now).
	Duration time.Duration
}
