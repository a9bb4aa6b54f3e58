package producer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/svcplatform/conventions"
	"github.com/svcplatform/conventions/webhook/producer/driver"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/webhook"
)

// RangePattern returns the net/http ServeMux pattern of range retrieval under the version segment
// version: RangePattern("v1") is "GET /v1/webhook_endpoints/{id}/events". RangeHandler reads the
// endpoint ID from its {id} wildcard unless RangeHandlerOptions.EndpointID says otherwise. A producer with
// several API versions serves range retrieval on each of them (a consumer asks under the version its
// licensee is pinned to): mount RangePattern(v) for each version v, or, behind a versioning.Router
// that strips the version segment (versioning.Options.StripVersion), RangePattern("") — the pattern
// without a version segment — once.
func RangePattern(version string) string {
	return versioned(version, "/webhook_endpoints/{id}/events")
}

// versioned is the GET pattern of path under the version segment, or without one when version is "".
func versioned(version, path string) string {
	if version == "" {
		return "GET " + path
	}
	return "GET /" + version + path
}

// Limits of the limit query parameter.
const (
	DefaultRangeLimit = 100
	MaxRangeLimit     = 1000
)

// Bounds of the RangeHandler's work, the defaults of RangeHandlerOptions.
const (
	// DefaultMaxPageBytes is the byte budget of one range page: a RangeClient's own cap on a response
	// (webhook.DefaultMaxResponseBytes), so that a consumer never gets a page it must refuse.
	DefaultMaxPageBytes = webhook.DefaultMaxResponseBytes
	// DefaultRangeInFlight is how many range requests of one licensee are served at once.
	DefaultRangeInFlight = 4
	// RangeChunk is how many events the RangeHandler reads at a time from a Log that is not a
	// ByteRanger: with events of at most DefaultMaxEventBytes, one read is at most a page's budget.
	RangeChunk = DefaultMaxPageBytes / DefaultMaxEventBytes
)

// Problem codes of range retrieval and the delivery history.
const (
	CodeInvalidCursor    = "invalid_cursor"  // starting_after is not an attempt ID
	CodeInvalidOutcome   = "invalid_outcome" // outcome is not delivered, failed or abandoned
	CodeEndpointNotFound = "webhook_endpoint_not_found"
	CodeEventsPruned     = "events_pruned"
	CodeNotInteger       = "not_an_integer"
	CodeOutOfRange       = "out_of_range"
	CodeRangeInverted    = "range_inverted"
	CodeRepeated         = "query_repeated"
	CodeRangeBusy        = "range_requests_in_flight"
)

// RangeHandlerOptions configures a RangeHandler. The zero value (or nil) means the defaults.
type RangeHandlerOptions struct {
	// EndpointID extracts the endpoint ID from the request; nil means r.PathValue("id"), for
	// RangePattern on a net/http ServeMux. Other routers pass their own.
	EndpointID func(r *http.Request) string
	// Render renders each event for the endpoint, as the Dispatcher's Render does, so that a fetched
	// event reads exactly as its delivery; nil returns events as stored.
	Render RenderFunc
	// Now is the clock that stamps the response signature; nil means time.Now.
	Now func() time.Time
	// Problems writes the problem responses: its TypeBase, and its Logger (nil means Logger). Fields
	// left empty come from the Writer apierror.Writer.Handler put in the request's context, else
	// apierror's defaults.
	Problems apierror.Writer
	// Logger records internal errors (the client sees an opaque 500); nil means no logging.
	Logger *slog.Logger
	// Hooks are told of each request (RangeStart, RangeEnd), so that serving it continues the
	// consumer's trace; nil observes nothing, at no cost.
	Hooks *Hooks
	// MaxPageBytes is the byte budget of a page: the handler reads no more event data than this
	// from the Log, and ends the page with has_more true before its body would exceed it — but a
	// page always holds at least one event, whatever its size. 0 means DefaultMaxPageBytes;
	// negative is an error.
	MaxPageBytes int
	// MaxInFlight bounds the range requests of one licensee served at once; one more is answered
	// 429 range_requests_in_flight with Retry-After. Together with MaxPageBytes it bounds the memory
	// one licensee can make the handler hold: MaxInFlight pages of about twice MaxPageBytes each.
	// 0 means DefaultRangeInFlight; negative is an error.
	MaxInFlight int
}

// RangeHandler serves range retrieval (the spec's part 6, rule 5):
//
//	GET /v1/webhook_endpoints/{id}/events?from=<n>&to=<n>&limit=<n>
//
// from is required (≥ 1); to defaults to the newest event; limit defaults to 100 and may be 1–1000.
// The answer is {"object":"list","data":[events],"has_more":bool}: events from..to inclusive,
// ascending, each rendered at the endpoint's pinned version, and the body signed with X-SVC-Signature
// like a delivery. Bad parameters are 400 problems located at the query parameter; a range starting
// below the retained window is 410 events_pruned naming the sequences that are gone and the first
// retained one; an unknown endpoint and another licensee's endpoint are the same 404.
//
// A page is bounded by bytes as well as by limit (RangeHandlerOptions.MaxPageBytes): a page of large events
// ends early with has_more true, so the consumer asks again from the next sequence; a page always
// holds at least one event. The events are read from the Log within the same budget (ByteRanger),
// so that one request holds about twice MaxPageBytes at most — the events read and the body — plus
// one rendered event; and a licensee has at most MaxInFlight requests served at once, so that
// concurrent large pages stay within MaxInFlight × 2 × MaxPageBytes per licensee.
//
// A RangeHandler is safe for concurrent use. The zero value is not usable: it answers every request
// with the opaque 500 (ErrNotBuilt). Build one with NewRangeHandler.
type RangeHandler struct {
	log        driver.Log
	endpoints  driver.Endpoints
	licensee   conventions.CallerFunc
	endpointID func(r *http.Request) string
	render     RenderFunc
	now        func() time.Time
	errs       apierror.Writer
	signers    signerCache
	hooks      *Hooks
	maxPage    int
	maxFlight  int
	flightMu   sync.Mutex
	inFlight   map[string]int // licensee → range requests being served
}

// NewRangeHandler returns the range retrieval handler for the events in log of the endpoints in
// endpoints. licensee is required: it names the licensee each request is authenticated as
// (apikey.RequestScope, or the service's own), and only that licensee's endpoints are visible; a
// request it names no licensee for sees none, and its error is written as the response (an
// *apierror.Error such as a 401 keeps its status). A nil log, endpoints or licensee is an error.
func NewRangeHandler(log driver.Log, endpoints driver.Endpoints, licensee conventions.CallerFunc, opts *RangeHandlerOptions) (*RangeHandler, error) {
	if err := handlerDeps("NewRangeHandler", log, endpoints, licensee); err != nil {
		return nil, err
	}
	h := &RangeHandler{log: log, endpoints: endpoints, licensee: licensee, now: time.Now,
		endpointID: func(r *http.Request) string { return r.PathValue("id") },
		maxPage:    DefaultMaxPageBytes, maxFlight: DefaultRangeInFlight, inFlight: make(map[string]int)}
	if opts != nil {
		switch {
		case opts.MaxPageBytes < 0:
			return nil, errors.New("producer: negative RangeHandlerOptions.MaxPageBytes")
		case opts.MaxInFlight < 0:
			return nil, errors.New("producer: negative RangeHandlerOptions.MaxInFlight")
		}
		h.maxPage = cmp.Or(opts.MaxPageBytes, h.maxPage)
		h.maxFlight = cmp.Or(opts.MaxInFlight, h.maxFlight)
		if opts.EndpointID != nil {
			h.endpointID = opts.EndpointID
		}
		h.render = opts.Render
		if opts.Now != nil {
			h.now = opts.Now
		}
		h.errs = opts.Problems
		h.hooks = opts.Hooks
		if h.errs.Logger == nil {
			h.errs.Logger = opts.Logger
		}
	}
	return h, nil
}

// handlerDeps checks the arguments every handler constructor requires.
func handlerDeps(ctor string, log driver.Log, endpoints driver.Endpoints, licensee conventions.CallerFunc) error {
	switch {
	case log == nil:
		return fmt.Errorf("producer: %s needs a Log", ctor)
	case endpoints == nil:
		return fmt.Errorf("producer: %s needs Endpoints", ctor)
	case licensee == nil:
		return fmt.Errorf("producer: %s needs a licensee CallerFunc", ctor)
	}
	return nil
}

// rangeQuery is a parsed range request, a plain value. The zero value asks for nothing (From 0 and
// Limit 0 are out of range); parseRangeQuery fills in the defaults.
type rangeQuery struct {
	From, To uint64 // inclusive; To is math.MaxUint64 when the request named none
	Limit    int
}

// parseRangeQuery reads from, to and limit, returning a 400 *apierror.Error that lists every bad
// parameter, each located at its name. An empty parameter counts as absent.
func parseRangeQuery(q url.Values) (rangeQuery, error) {
	rq := rangeQuery{To: math.MaxUint64, Limit: DefaultRangeLimit}
	var c apierror.Collector
	from, fromState := queryUint(&c, q, "from")
	to, toState := queryUint(&c, q, "to")
	limit, limitState := queryUint(&c, q, "limit")
	switch fromState {
	case paramAbsent:
		c.Add(apierror.Query("from", apierror.CodeQueryMissing, "query parameter from is required"))
	case paramSet:
		if c.Check(from >= 1, apierror.Query("from", CodeOutOfRange, "must be at least 1")) {
			rq.From = from
		}
	}
	if toState == paramSet {
		rq.To = to
		if rq.From >= 1 {
			c.Check(to >= rq.From, apierror.Query("to", CodeRangeInverted,
				"must not be below from ("+strconv.FormatUint(rq.From, 10)+")"))
		}
	}
	if limitState == paramSet {
		if c.Check(limit >= 1 && limit <= MaxRangeLimit, apierror.Query("limit", CodeOutOfRange,
			fmt.Sprintf("must be between 1 and %d", MaxRangeLimit))) {
			rq.Limit = int(limit)
		}
	}
	if err := c.Err(); err != nil {
		return rangeQuery{}, err
	}
	return rq, nil
}

type paramState int

const (
	paramAbsent paramState = iota
	paramSet
	paramBad // a violation was recorded
)

// queryUint reads one decimal query parameter. Absent and empty are paramAbsent (the caller decides
// whether that is allowed); a repeated, non-numeric or overflowing value records a violation.
func queryUint(c *apierror.Collector, q url.Values, name string) (uint64, paramState) {
	vs := q[name]
	switch {
	case len(vs) == 0 || (len(vs) == 1 && vs[0] == ""):
		return 0, paramAbsent
	case len(vs) > 1:
		c.Add(apierror.Query(name, CodeRepeated, "must be given once"))
		return 0, paramBad
	}
	n, err := strconv.ParseUint(vs[0], 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			c.Add(apierror.Query(name, CodeOutOfRange, "is too large"))
		} else {
			// The value is not echoed: a client may have put anything there.
			c.Add(apierror.Query(name, CodeNotInteger, "must be a non-negative decimal integer"))
		}
		return 0, paramBad
	}
	return n, paramSet
}

// ServeHTTP implements http.Handler.
func (h *RangeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h == nil || h.log == nil {
		apierror.Write(w, r, errZeroRangeHandler)
		return
	}
	if o := h.hooks; o != nil {
		h.serveObserved(w, r, o)
		return
	}
	h.serve(w, r)
}

// serveObserved serves r in the context the hooks return and tells them the answer.
func (h *RangeHandler) serveObserved(w http.ResponseWriter, r *http.Request, o *Hooks) {
	ctx := o.rangeStart(r.Context(), RangeInfo{Endpoint: h.endpointID(r), Trace: webhook.NewTraceCarrier(r.Header)})
	sw := &statusWriter{ResponseWriter: w}
	events := h.serve(sw, r.WithContext(ctx))
	res := RangeResult{Status: sw.status}
	if res.Status == 0 {
		res.Status = http.StatusOK // nothing written: net/http answers 200
	}
	if res.Status == http.StatusOK {
		res.Events = events
	}
	o.rangeEnd(ctx, res)
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// serve answers a range request and returns how many events the answer holds.
func (h *RangeHandler) serve(w http.ResponseWriter, r *http.Request) int {
	ctx := r.Context()
	ep, ok := ownEndpoint(w, r, &h.errs, h.endpoints, h.licensee, h.endpointID(r))
	if !ok {
		return 0
	}
	query, err := apierror.ParseQuery(r) // a malformed "to" must not read as no "to" at all
	if err != nil {
		h.errs.Write(w, r, err)
		return 0
	}
	rq, err := parseRangeQuery(query)
	if err != nil {
		h.errs.Write(w, r, err)
		return 0
	}
	if !h.enter(ep.Owner) {
		h.errs.Write(w, r, h.busy())
		return 0
	}
	defer h.leave(ep.Owner)
	// The events' data may take the budget less the list's own frame and each event's envelope;
	// what rendering adds is checked as the body is built.
	events, more, err := h.read(ctx, ep.ID, rq, max(1, h.maxPage-listFrame))
	var pe *driver.PrunedError
	switch {
	case errors.As(err, &pe):
		h.errs.Write(w, r, pruned(ep.ID, rq, pe.FirstRetained))
		return 0
	case err != nil:
		h.errs.Write(w, r, err)
		return 0
	}
	body, n, err := h.encodePage(ctx, ep, events, more)
	if err != nil {
		h.errs.Write(w, r, err)
		return 0
	}
	events = nil // the body holds the page now
	signer, err := h.signers.get(ep.ID, ep.SigningSecrets(h.now()))
	var sig string
	if err == nil {
		sig, err = signer.Sign(body, h.now())
	}
	if err != nil {
		h.errs.Write(w, r, fmt.Errorf("producer: sign range of %s: %w", ep.ID, err))
		return 0
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	hd.Set(webhook.HeaderSignature, sig)
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
	return n
}

// enter takes one of the licensee's in-flight slots, or reports that all are taken.
func (h *RangeHandler) enter(licensee string) bool {
	h.flightMu.Lock()
	defer h.flightMu.Unlock()
	if h.inFlight[licensee] >= h.maxFlight {
		return false
	}
	h.inFlight[licensee]++
	return true
}

func (h *RangeHandler) leave(licensee string) {
	h.flightMu.Lock()
	defer h.flightMu.Unlock()
	if h.inFlight[licensee]--; h.inFlight[licensee] <= 0 {
		delete(h.inFlight, licensee)
	}
}

// busy is the answer to a request over the licensee's in-flight bound.
func (h *RangeHandler) busy() *apierror.Error {
	return apierror.New(http.StatusTooManyRequests, CodeRangeBusy,
		fmt.Sprintf("this licensee already has %d range requests of webhook events in progress, the most served at once; retry after the number of seconds in Retry-After", h.maxFlight)).
		WithHeader("Retry-After", apierror.RetryAfter(time.Second))
}

// listFrame is what a page's body takes besides its events: the list's members and the commas.
const listFrame = len(`{"object":"list","data":[],"has_more":false}`)

// read reads a page's events within maxBytes of data: in one call from a ByteRanger, else through
// Range in chunks of RangeChunk events, stopping at the budget.
func (h *RangeHandler) read(ctx context.Context, stream string, rq rangeQuery, maxBytes int) ([]webhook.Event, bool, error) {
	if err := checkRangeBytes(rq.From, rq.To, rq.Limit, maxBytes); err != nil {
		return nil, false, err // the driver contract: parseRangeQuery and the options keep to it
	}
	if br, ok := h.log.(driver.ByteRanger); ok {
		return br.RangeBytes(ctx, stream, rq.From, rq.To, rq.Limit, maxBytes)
	}
	var (
		out  []webhook.Event
		size int
	)
	for from := rq.From; ; {
		evs, more, err := h.log.Range(ctx, stream, from, rq.To, min(rq.Limit-len(out), RangeChunk))
		if err != nil {
			if len(out) > 0 && errors.Is(err, driver.ErrPruned) {
				return out, true, nil // retention ran between two reads: the next page says so
			}
			return nil, false, err
		}
		for _, ev := range evs {
			if len(out) > 0 && size+len(ev.Data) > maxBytes {
				return out, true, nil
			}
			out = append(out, ev)
			size += len(ev.Data)
		}
		if !more || len(evs) == 0 || len(out) == rq.Limit {
			return out, more, nil
		}
		from = evs[len(evs)-1].Sequence + 1
	}
}

// encodePage renders each event for ep and encodes the page's body, ending the page early (has_more
// true) before the body would exceed the budget; the first event goes in whatever its size. It
// returns the body and how many events it holds.
func (h *RangeHandler) encodePage(ctx context.Context, ep Endpoint, events []webhook.Event, more bool) ([]byte, int, error) {
	size := listFrame
	for i := range events {
		size += eventSize(&events[i]) + 1
	}
	b := make([]byte, 0, min(size, h.maxPage))
	b = append(b, `{"object":"list","data":[`...)
	n := 0
	for i := range events {
		ev, err := render(ctx, h.render, ep, events[i])
		if err != nil {
			return nil, 0, err
		}
		events[i] = webhook.Event{} // what was read is released as the page is built
		mark := len(b)
		if n > 0 {
			b = append(b, ',')
		}
		b = appendEvent(b, &ev)
		if n > 0 && len(b)+len(`],"has_more":false}`) > h.maxPage {
			b, more = b[:mark], true
			break
		}
		n++
	}
	b = append(b, `],"has_more":`...)
	b = strconv.AppendBool(b, more)
	return append(b, '}'), n, nil
}

// ownEndpoint is the prologue of the per-endpoint GET handlers: only GET and HEAD, and the endpoint
// named id must be the authenticated licensee's. Otherwise it writes the problem and reports false;
// another licensee's endpoint reads exactly like one that does not exist.
func ownEndpoint(w http.ResponseWriter, r *http.Request, errs *apierror.Writer, endpoints driver.Endpoints,
	licenseeOf conventions.CallerFunc, id string) (Endpoint, bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		errs.Write(w, r, apierror.MethodNotAllowed(r.Method, http.MethodGet, http.MethodHead))
		return Endpoint{}, false
	}
	ep, err := callersEndpoint(r, endpoints, licenseeOf, id)
	if err != nil {
		errs.Write(w, r, err)
		return Endpoint{}, false
	}
	return ep, true
}

// callersEndpoint returns the endpoint id when it is the request's licensee's — deleted ones
// included, whose streams range retrieval still serves — or the error to answer: the licensee's
// refusal, the 404 an unknown endpoint gets too, or the registry's failure.
func callersEndpoint(r *http.Request, endpoints driver.Endpoints, licenseeOf conventions.CallerFunc, id string) (Endpoint, error) {
	licensee, err := licenseeOf(r)
	if err != nil {
		return Endpoint{}, err
	}
	ep, err := endpoints.Lookup(r.Context(), id)
	switch {
	case errors.Is(err, ErrUnknownEndpoint) || (err == nil && (licensee == "" || ep.Owner != licensee)):
		return Endpoint{}, notFound(id)
	case err != nil:
		return Endpoint{}, err
	}
	return ep, nil
}

func notFound(id string) *apierror.Error {
	return apierror.NotFound(CodeEndpointNotFound, "no webhook endpoint "+strconv.Quote(id),
		apierror.Path("id", CodeEndpointNotFound, "names no webhook endpoint of yours"))
}

func pruned(id string, rq rangeQuery, first uint64) *apierror.Error {
	last := min(rq.To, first-1)
	gone := strconv.FormatUint(rq.From, 10)
	if last > rq.From {
		gone += "–" + strconv.FormatUint(last, 10)
	}
	detail := fmt.Sprintf("events %s of webhook endpoint %s are past the retention window and gone; the first retained sequence is %d",
		gone, strconv.Quote(id), first)
	return apierror.Gone(CodeEventsPruned, detail,
		apierror.Query("from", CodeEventsPruned, fmt.Sprintf("must be at least %d, the first retained sequence", first))).
		With("first_retained", first)
}
