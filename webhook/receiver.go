package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/svcplatform/conventions/apierror"
)

// Problem codes a Receiver answers with, beside apierror's own (header_missing, malformed_json,
// body_too_large, field_missing, …).
const (
	CodeSignatureInvalid  = "signature_invalid"   // 400: X-SVC-Signature is malformed
	CodeSignatureMismatch = "signature_mismatch"  // 401: no v1 matches a secret
	CodeSignatureTooOld   = "signature_too_old"   // 401: authentic, but older than the tolerance
	CodeSignatureTooNew   = "signature_too_new"   // 401: authentic, but ahead of the clock by more than the tolerance
	CodeSequenceInvalid   = "sequence_invalid"    // 400: X-SVC-Sequence is not a sequence number
	CodeEndpointMismatch  = "endpoint_mismatch"   // 401: authentic, but signed for another endpoint
	CodeDeliveryFailed    = "delivery_not_stored" // 503: gap fetch, processing or the cursor store failed
)

// DefaultRetryAfter is the Retry-After of a Receiver's 503 when ReceiverOptions.RetryAfter is zero.
const DefaultRetryAfter = 10 * time.Second

// ReceiverOptions tune a Receiver. A nil *ReceiverOptions and the zero value mean the defaults.
type ReceiverOptions struct {
	// MaxBodyBytes caps a delivery's body; zero means apierror.DefaultMaxBodyBytes (1 MiB). A larger
	// body is answered 413 without being read further.
	MaxBodyBytes int64
	// RetryAfter is sent with every 503; zero means DefaultRetryAfter.
	RetryAfter time.Duration
	// Problems writes the problem responses (its TypeBase and Logger); the zero value is apierror's
	// defaults.
	Problems apierror.Writer
	// Logger records why deliveries were refused with 503 (never a signature or secret); nil means no
	// logging.
	Logger *slog.Logger
	// Hooks are told of each delivery, from its arrival (ReceiveStart, with the trace context the
	// producer sent) to its answer (ReceiveEnd); nil means none. The verification and the sequence
	// decision are reported by the Verifier's and the Tracker's own hooks (VerifierOptions.Hooks,
	// TrackerOptions.Hooks), with the context ReceiveStart returned.
	Hooks *Hooks
}

// Receiver is the net/http handler for one webhook endpoint. For each POST it reads the raw body once
// (size-capped), verifies X-SVC-Signature over exactly those bytes, decodes the envelope, checks that
// X-SVC-Sequence agrees with it, and hands the event to the Tracker. Answers:
//
//   - 200 {"sequence":n,"outcome":"processed"|"duplicate","recovered":k} — the producer stops retrying;
//   - 400 — a malformed X-SVC-Signature or X-SVC-Sequence, a body that is not an event, or a sequence
//     mismatch, located at the header or body member;
//   - 401 — no signature matches, or the timestamp is outside the tolerance (never saying which secret
//     was tried or what was expected), or the signed body names another endpoint than this one (a
//     delivery captured on its way to an endpoint that shares this one's secret);
//   - 413 — a body over the cap; 405 — a method other than POST;
//   - 503 with Retry-After — a gap could not be fetched, processing failed, or the cursor store is
//     down: nothing was skipped, and the producer's retry will try again.
//
// A Receiver is safe for concurrent use. Its zero value is not usable: it answers every delivery with
// the opaque 500, and its Receive returns an error that wraps ErrNotBuilt. Build one with NewReceiver.
type Receiver struct {
	stream     string
	verifier   *Verifier
	tracker    *Tracker
	maxBytes   int64
	retryAfter time.Duration
	problems   apierror.Writer
	log        *slog.Logger
	hooks      *Hooks
}

// NewReceiver returns the handler for the webhook endpoint stream (its ID, as the producer knows it:
// the RangeFetcher is asked for this stream's missing events). All arguments but opts are required.
func NewReceiver(stream string, v *Verifier, t *Tracker, opts *ReceiverOptions) (*Receiver, error) {
	switch {
	case stream == "":
		return nil, errors.New("webhook: NewReceiver needs the endpoint's stream ID")
	case v == nil || len(v.keys) == 0:
		return nil, fmt.Errorf("%w: NewReceiver needs a Verifier from NewVerifier", ErrNoSecret)
	case t == nil:
		return nil, errors.New("webhook: NewReceiver needs a Tracker")
	}
	rc := &Receiver{stream: stream, verifier: v, tracker: t,
		maxBytes: apierror.DefaultMaxBodyBytes, retryAfter: DefaultRetryAfter}
	if opts != nil {
		if opts.MaxBodyBytes < 0 || opts.RetryAfter < 0 {
			return nil, errors.New("webhook: negative ReceiverOptions value")
		}
		if opts.MaxBodyBytes > 0 {
			rc.maxBytes = opts.MaxBodyBytes
		}
		if opts.RetryAfter > 0 {
			rc.retryAfter = opts.RetryAfter
		}
		rc.problems = opts.Problems
		rc.log = opts.Logger
		rc.hooks = opts.Hooks
	}
	if rc.log == nil {
		rc.log = slog.New(slog.DiscardHandler)
	}
	return rc, nil
}

// ServeHTTP handles one delivery.
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rc == nil || rc.tracker == nil {
		apierror.Write(w, r, errZeroReceiver)
		return
	}
	ctx := r.Context()
	if o := rc.hooks; o != nil {
		start := rc.verifier.now()
		ctx = o.receiveStart(ctx, ReceiveStartInfo{Stream: rc.stream, Trace: TraceCarrier{r.Header}})
		res, err := rc.serve(ctx, w, r)
		rc.receiveEnd(ctx, o, start, res, err)
		return
	}
	_, _ = rc.serve(ctx, w, r)
}

// serve answers the delivery r, handled in ctx, and returns what it answered.
func (rc *Receiver) serve(ctx context.Context, w http.ResponseWriter, r *http.Request) (Result, error) {
	if r.Method != http.MethodPost {
		err := apierror.MethodNotAllowed(r.Method, http.MethodPost)
		rc.problems.Write(w, r, err)
		return Result{}, err
	}
	body, err := rc.readBody(w, r)
	if err != nil {
		rc.problems.Write(w, r, err)
		return Result{}, err
	}
	res, err := rc.receive(ctx, r.Header.Get(HeaderSignature), r.Header.Get(HeaderSequence), body)
	if err != nil {
		rc.problems.Write(w, r, err)
		return res, err
	}
	out := make([]byte, 0, 64)
	out = append(out, `{"sequence":`...)
	out = strconv.AppendUint(out, res.Sequence, 10)
	out = append(out, `,"outcome":"`...)
	out = append(out, res.Outcome.String()...)
	out = append(out, `","recovered":`...)
	out = strconv.AppendInt(out, int64(res.Recovered), 10)
	out = append(out, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	return res, nil
}

// readBody reads the whole body once, refusing more than the cap.
func (rc *Receiver) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > rc.maxBytes {
		return nil, apierror.BodyTooLarge(rc.maxBytes)
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + 1) // +1 so that reading up to EOF does not grow it again
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, rc.maxBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, apierror.BodyTooLarge(rc.maxBytes)
		}
		return nil, apierror.Invalid(apierror.Body("", "body_unreadable", "the request body could not be read completely"))
	}
	return buf.Bytes(), nil
}

// Receive is ServeHTTP without HTTP: it decides on one delivery given its X-SVC-Signature and
// X-SVC-Sequence values and its raw body. Every error is an *apierror.Error carrying the status
// ServeHTTP would answer with; the cause of a 503 is logged, not returned to the producer.
func (rc *Receiver) Receive(ctx context.Context, signature, sequence string, body []byte) (Result, error) {
	if rc == nil || rc.tracker == nil {
		return Result{}, errZeroReceiver
	}
	if o := rc.hooks; o != nil {
		start := rc.verifier.now()
		ctx = o.receiveStart(ctx, ReceiveStartInfo{Stream: rc.stream})
		res, err := rc.receive(ctx, signature, sequence, body)
		rc.receiveEnd(ctx, o, start, res, err)
		return res, err
	}
	return rc.receive(ctx, signature, sequence, body)
}

// receive is Receive without the observer's start and end.
func (rc *Receiver) receive(ctx context.Context, signature, sequence string, body []byte) (Result, error) {
	if _, err := rc.verifier.check(ctx, false /* a delivery */, signature, body); err != nil {
		return Result{}, signatureProblem(err)
	}
	seq, err := ParseSequence(sequence)
	if err != nil {
		if errors.Is(err, ErrMissingSequence) {
			return Result{}, apierror.MissingHeader(HeaderSequence)
		}
		return Result{}, apierror.Invalid(apierror.Header(HeaderSequence, CodeSequenceInvalid,
			"must be a decimal sequence number from 1 to 9223372036854775807, without sign or leading zeros"))

	}
	if len(body) == 0 {
		return Result{}, apierror.Invalid(apierror.Body("", apierror.CodeBodyMissing, "a JSON event is required"))
	}
	ev, err := DecodeEvent(body)
	if err != nil {
		return Result{}, err
	}
	// The envelope names the endpoint it was signed for. A producer that names none (older ones) is
	// trusted on its signature alone; one that names another endpoint is refused.
	if ev.Endpoint != "" && ev.Endpoint != rc.stream {
		detail := "the signed body is for another webhook endpoint"
		return Result{}, apierror.New(http.StatusUnauthorized, CodeEndpointMismatch, detail,
			apierror.Body("/endpoint", CodeEndpointMismatch, "names another endpoint than the one receiving it"))
	}
	if ev.Sequence != seq {
		detail := "header " + HeaderSequence + " says " + strconv.FormatUint(seq, 10) +
			" but the signed body's sequence is " + strconv.FormatUint(ev.Sequence, 10)
		return Result{}, apierror.New(http.StatusBadRequest, CodeSequenceMismatch, detail,
			apierror.Header(HeaderSequence, CodeSequenceMismatch, "does not match the body's sequence"),
			apierror.Body("/sequence", CodeSequenceMismatch, "does not match the "+HeaderSequence+" header"))
	}
	res, err := rc.tracker.Receive(ctx, rc.stream, &ev)
	if err != nil {
		rc.log.WarnContext(ctx, "webhook: delivery refused with 503, the producer will retry",
			"stream", rc.stream, "sequence", ev.Sequence, "event_id", ev.ID, "recovered", res.Recovered, "error", err)
		return Result{}, apierror.Unavailable(rc.retryAfter, CodeDeliveryFailed,
			"the event could not be processed now; nothing was skipped, deliver it again later")
	}
	return res, nil
}

// signatureProblem maps a verification error to its problem: 400 for a header that is missing or
// malformed, 401 for a well-formed one that does not authenticate the body now.
func signatureProblem(err error) *apierror.Error {
	var code, detail string
	switch {
	case errors.Is(err, ErrMissingHeader):
		return apierror.MissingHeader(HeaderSignature)
	case errors.Is(err, ErrMalformedHeader):
		// err names what is wrong with the header's shape, never a value from it.
		reason := strings.TrimPrefix(err.Error(), ErrMalformedHeader.Error()+": ")
		return apierror.Invalid(apierror.Header(HeaderSignature, CodeSignatureInvalid,
			"must be t=<unix seconds>,v1=<64 hex digits>[,v1=…] ("+reason+")"))

	case errors.Is(err, ErrTooOld):
		code, detail = CodeSignatureTooOld, "the signature's timestamp is older than the receiver's tolerance"
	case errors.Is(err, ErrTooNew):
		code, detail = CodeSignatureTooNew, "the signature's timestamp is ahead of the receiver's clock by more than the tolerance"
	default:
		code, detail = CodeSignatureMismatch, "no signature matches the body under the endpoint's signing secret"
	}
	return apierror.New(http.StatusUnauthorized, code, detail, apierror.Header(HeaderSignature, code, detail)).
		WithHeader("WWW-Authenticate", `HMAC-SHA256 header="`+HeaderSignature+`"`)
}

var _ http.Handler = (*Receiver)(nil)
