package producer

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/svcplatform/conventions"
	"github.com/svcplatform/conventions/webhook/producer/driver"

	"github.com/svcplatform/conventions/apierror"
)

// DeliveriesPattern returns the net/http ServeMux pattern of the delivery history under the version
// segment version, as RangePattern does: DeliveriesPattern("v1") is
// "GET /v1/webhook_endpoints/{id}/deliveries", DeliveriesPattern("") has no version segment.
// DeliveriesHandler reads the endpoint ID from its {id} wildcard unless DeliveriesHandlerOptions.EndpointID
// says otherwise.
func DeliveriesPattern(version string) string {
	return versioned(version, "/webhook_endpoints/{id}/deliveries")
}

// Limits of the history's limit query parameter.
const (
	DefaultDeliveriesLimit = 20
	MaxDeliveriesLimit     = 100
)

// AttemptIDPrefix starts every attempt ID of the history API: "att_" and the attempt's ID in
// decimal, a random number that says nothing about other attempts.
const AttemptIDPrefix = "att_"

// DeliveriesHandlerOptions configures a DeliveriesHandler. The zero value (or nil) means the defaults.
type DeliveriesHandlerOptions struct {
	// EndpointID extracts the endpoint ID from the request; nil means r.PathValue("id").
	EndpointID func(r *http.Request) string
	// Problems writes the problem responses: its TypeBase, and its Logger (nil means Logger). Fields
	// left empty come from the Writer apierror.Writer.Handler put in the request's context, else
	// apierror's defaults.
	Problems apierror.Writer
	// Logger records internal errors (the client sees an opaque 500); nil means no logging.
	Logger *slog.Logger
	// Now is the clock of the statistics' windows, the backlog's age and the redeliveries' due time;
	// nil means time.Now.
	Now func() time.Time
	// Wake is called after resend or recover queued events, so that they go out at once rather than
	// at the Dispatcher's next poll: Dispatcher.Wake. nil means none.
	Wake func()
	// MaxRecover bounds the events one recover request pushes again; 0 means DefaultMaxRecover.
	MaxRecover int
}

// DeliveriesHandler serves the delivery history of a webhook endpoint, what a support engineer (or a
// sandbox evaluator) needs to see why a consumer did or did not get an event:
//
//	GET /v1/webhook_endpoints/we_123/deliveries?sequence=7&outcome=failed&limit=20&starting_after=att_4417093326815720611
//
//	HTTP/1.1 200 OK
//	Content-Type: application/json
//
//	{"object":"list","has_more":false,"data":[
//	  {"id":"att_7730928417361520117","object":"webhook_delivery_attempt","endpoint":"we_123","event":"evt_…","sequence":7,
//	   "attempt":1,"outcome":"failed","created":1767225661,"latency_ms":10000,"status_code":null,
//	   "error_class":"timeout","error":"timeout","response":"","next_attempt_at":1767225721}]}
//
// Attempts are listed newest first, by time; starting_after takes the id of the last attempt of the
// previous page. Attempt IDs are random, so that no tenant learns from its own how many attempts went
// to others. sequence keeps one event's attempts, outcome keeps one outcome (delivered, failed — another
// attempt is scheduled — or abandoned); limit is 1–100, default 20. Bad parameters are 400 problems
// located at the parameter; an unknown endpoint and another licensee's endpoint are the same 404 as
// range retrieval's. The history is kept as long as its events (the retention).
//
// A DeliveriesHandler is safe for concurrent use. Build one with NewDeliveriesHandler; the zero value
// is not usable: it answers every request with the opaque 500 (ErrNotBuilt).
type DeliveriesHandler struct {
	log        driver.Log
	endpoints  driver.Endpoints
	licensee   conventions.CallerFunc
	endpointID func(r *http.Request) string
	errs       apierror.Writer
	now        func() time.Time
	wake       func()
	maxRecover int
}

// NewDeliveriesHandler returns the delivery history handler for the attempts in log of the endpoints
// in endpoints; licensee maps each request to the licensee it is authenticated as, as for
// NewRangeHandler. A nil log, endpoints or licensee is an error.
func NewDeliveriesHandler(log driver.Log, endpoints driver.Endpoints, licensee conventions.CallerFunc, opts *DeliveriesHandlerOptions) (*DeliveriesHandler, error) {
	if err := handlerDeps("NewDeliveriesHandler", log, endpoints, licensee); err != nil {
		return nil, err
	}
	h := &DeliveriesHandler{log: log, endpoints: endpoints, licensee: licensee,
		endpointID: func(r *http.Request) string { return r.PathValue("id") }, now: time.Now}
	if opts != nil {
		if opts.Now != nil {
			h.now = opts.Now
		}
		h.wake, h.maxRecover = opts.Wake, opts.MaxRecover
		if opts.EndpointID != nil {
			h.endpointID = opts.EndpointID
		}
		h.errs = opts.Problems
		if h.errs.Logger == nil {
			h.errs.Logger = opts.Logger
		}
	}
	switch {
	case h.maxRecover == 0:
		h.maxRecover = DefaultMaxRecover
	case h.maxRecover < 0:
		return nil, errors.New("producer: NewDeliveriesHandler: negative MaxRecover")
	}
	return h, nil
}

// parseDeliveriesQuery reads sequence, outcome, limit and starting_after into an AttemptQuery for
// stream, returning a 400 *apierror.Error that lists every bad parameter, each located at its name.
func parseDeliveriesQuery(stream string, q url.Values) (driver.AttemptQuery, error) {
	aq := driver.AttemptQuery{Stream: stream, Limit: DefaultDeliveriesLimit}
	var c apierror.Collector
	if seq, st := queryUint(&c, q, "sequence"); st == paramSet {
		if c.Check(seq >= 1, apierror.Query("sequence", CodeOutOfRange, "must be at least 1")) {
			aq.Sequence = seq
		}
	}
	if limit, st := queryUint(&c, q, "limit"); st == paramSet {
		if c.Check(limit >= 1 && limit <= MaxDeliveriesLimit, apierror.Query("limit", CodeOutOfRange,
			fmt.Sprintf("must be between 1 and %d", MaxDeliveriesLimit))) {
			aq.Limit = int(limit)
		}
	}
	if v, st := queryString(&c, q, "outcome"); st == paramSet {
		switch v {
		case "delivered":
			aq.Outcome = driver.OutcomeDelivered
		case "failed":
			aq.Outcome = driver.OutcomeFailed
		case "abandoned":
			aq.Outcome = driver.OutcomeAbandoned
		default:
			c.Add(apierror.Query("outcome", CodeInvalidOutcome, "must be delivered, failed or abandoned"))
		}
	}
	if v, st := queryString(&c, q, "starting_after"); st == paramSet {
		n, err := strconv.ParseUint(strings.TrimPrefix(v, AttemptIDPrefix), 10, 64)
		if c.Check(strings.HasPrefix(v, AttemptIDPrefix) && err == nil && n >= 1,
			apierror.Query("starting_after", CodeInvalidCursor, "must be the id of an attempt (att_…) from a previous page")) {
			aq.Before = n
		}
	}
	if err := c.Err(); err != nil {
		return driver.AttemptQuery{}, err
	}
	return aq, nil
}

// queryString reads one query parameter that must not repeat; absent and empty are paramAbsent.
func queryString(c *apierror.Collector, q url.Values, name string) (string, paramState) {
	vs := q[name]
	switch {
	case len(vs) == 0 || (len(vs) == 1 && vs[0] == ""):
		return "", paramAbsent
	case len(vs) > 1:
		c.Add(apierror.Query(name, CodeRepeated, "must be given once"))
		return "", paramBad
	}
	return vs[0], paramSet
}

// attemptJSON is one attempt as the history API shows it.
type attemptJSON struct {
	ID            string  `json:"id"`
	Object        string  `json:"object"`
	Endpoint      string  `json:"endpoint"`
	Event         string  `json:"event"`
	Sequence      uint64  `json:"sequence"`
	Attempt       int     `json:"attempt"`
	Outcome       string  `json:"outcome"`
	Created       int64   `json:"created"`
	LatencyMS     int64   `json:"latency_ms"`
	StatusCode    *int    `json:"status_code"`
	ErrorClass    *string `json:"error_class"`
	Error         *string `json:"error"`
	Response      string  `json:"response"`
	NextAttemptAt *int64  `json:"next_attempt_at"`
}

type attemptList struct {
	Object  string        `json:"object"`
	Data    []attemptJSON `json:"data"`
	HasMore bool          `json:"has_more"`
}

func attemptView(a driver.AttemptRecord) attemptJSON {
	v := attemptJSON{
		ID: AttemptIDPrefix + strconv.FormatUint(a.ID, 10), Object: "webhook_delivery_attempt",
		Endpoint: a.Stream, Event: a.EventID, Sequence: a.Sequence, Attempt: a.Number,
		Outcome: a.Outcome.String(), Created: a.At.Unix(), LatencyMS: a.Latency.Milliseconds(),
		Response: a.Response,
	}
	if a.StatusCode != 0 {
		v.StatusCode = &a.StatusCode
	}
	if a.Class != "" {
		v.ErrorClass, v.Error = &a.Class, &a.Reason
	}
	if a.Outcome == driver.OutcomeFailed && !a.RetryAt.IsZero() {
		t := a.RetryAt.Unix()
		v.NextAttemptAt = &t
	}
	return v
}

// ServeHTTP implements http.Handler.
func (h *DeliveriesHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h == nil || h.log == nil {
		apierror.Write(w, r, errZeroDeliveriesHandler)
		return
	}
	ctx := r.Context()
	ep, ok := ownEndpoint(w, r, &h.errs, h.endpoints, h.licensee, h.endpointID(r))
	if !ok {
		return
	}
	query, err := apierror.ParseQuery(r)
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	q, err := parseDeliveriesQuery(ep.ID, query)
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	if err := checkAttemptQuery(q); err != nil {
		h.errs.Write(w, r, err)
		return
	}
	recs, more, err := h.log.Attempts(ctx, q)
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	list := attemptList{Object: "list", Data: make([]attemptJSON, len(recs)), HasMore: more}
	for i, a := range recs {
		list.Data[i] = attemptView(a)
	}
	body, err := json.Marshal(list)
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}
