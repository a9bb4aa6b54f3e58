package producer

// The operations on an endpoint's deliveries beside their history: statistics, resend and recover.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// DefaultMaxRecover is the most events one recover request may push again when
// DeliveriesHandlerOptions.MaxRecover is 0.
const DefaultMaxRecover = 10_000

// Problem codes of resend and recover, beside CodeEndpointNotFound and CodeEventsPruned.
const (
	// CodeEventNotFound: resend names a sequence the endpoint's stream has not reached (404).
	CodeEventNotFound = "event_not_found"
	// CodeRangeTooLarge: recover names more events than DeliveriesHandlerOptions.MaxRecover (400).
	CodeRangeTooLarge = "range_too_large"
	// CodeEndpointDisabled: resend or recover to a disabled endpoint, which would be sent nothing;
	// enable it first (422).
	CodeEndpointDisabled = "webhook_endpoint_disabled"
)

// Register mounts the delivery operations on mux under the version segment version ("" for none),
// each POST wrapped by mutating (the idempotency middleware; nil mounts them bare):
//
//	GET  /v1/webhook_endpoints/{id}/deliveries                  the history (ServeHTTP)
//	GET  /v1/webhook_endpoints/{id}/stats                       attempts by outcome, success rate and
//	                                                            latency for the last hour, day and week,
//	                                                            the day's 24 hours (without latency),
//	                                                            the backlog and the endpoint's status
//	POST /v1/webhook_endpoints/{id}/events/{sequence}/resend    push one retained event again
//	POST /v1/webhook_endpoints/{id}/recover {"from","to"}       push a retained range again
//
// stats is mounted when the Log is a driver.StatsReader, resend and recover when it is a
// driver.Redeliverer (memstore's and pgstore's logs are both).
func (h *DeliveriesHandler) Register(mux *http.ServeMux, version string, mutating func(http.Handler) http.Handler) {
	if mutating == nil {
		mutating = func(next http.Handler) http.Handler { return next }
	}
	mux.Handle(DeliveriesPattern(version), h)
	if _, ok := h.log.(driver.StatsReader); ok {
		mux.HandleFunc(versioned(version, "/webhook_endpoints/{id}/stats"), h.stats)
	}
	if _, ok := h.log.(driver.Redeliverer); ok {
		mux.Handle("POST "+pathOf(versioned(version, "/webhook_endpoints/{id}/events/{sequence}/resend")),
			mutating(http.HandlerFunc(h.resend)))
		mux.Handle("POST "+pathOf(versioned(version, "/webhook_endpoints/{id}/recover")), mutating(http.HandlerFunc(h.recover)))
	}
}

// pathOf strips the method versioned puts in front of a pattern.
func pathOf(pattern string) string { return pattern[len("GET "):] }

// refuse answers a request refused before anything changed: a 4xx marked so is not stored by the
// idempotency middleware, so the same key with corrected input runs again.
func (h *DeliveriesHandler) refuse(w http.ResponseWriter, r *http.Request, err error) {
	idempotency.NotPerformed(w)
	h.errs.Write(w, r, err)
}

// liveEndpoint returns the request's endpoint when it is the caller's and not deleted, or writes the
// 404 that an unknown endpoint gets too.
func (h *DeliveriesHandler) liveEndpoint(w http.ResponseWriter, r *http.Request) (Endpoint, bool) {
	id := h.endpointID(r)
	ep, err := callersEndpoint(r, h.endpoints, h.licensee, id)
	if err == nil && !ep.DeletedAt.IsZero() {
		err = notFound(id)
	}
	if err != nil {
		h.refuse(w, r, err)
		return Endpoint{}, false
	}
	return ep, true
}

// windowJSON is one window of the statistics.
type windowJSON struct {
	Attempts    int          `json:"attempts"`
	Delivered   int          `json:"delivered"`
	Failed      int          `json:"failed"`
	Abandoned   int          `json:"abandoned"`
	SuccessRate *float64     `json:"success_rate"`
	LatencyMS   *latencyJSON `json:"latency_ms"`
}

// hourJSON is one hour of the day's, for drawing the day: a window's counts without latency.
type hourJSON struct {
	Start       int64    `json:"start"` // unix seconds, a multiple of 3600
	Attempts    int      `json:"attempts"`
	Delivered   int      `json:"delivered"`
	Failed      int      `json:"failed"`
	Abandoned   int      `json:"abandoned"`
	SuccessRate *float64 `json:"success_rate"`
}

type latencyJSON struct {
	P50 int64 `json:"p50"`
	P99 int64 `json:"p99"`
}

type backlogJSON struct {
	Events    int    `json:"events"`
	OldestAge *int64 `json:"oldest_age"`
}

type statsJSON struct {
	Object         string      `json:"object"` // "webhook_endpoint_stats"
	Endpoint       string      `json:"endpoint"`
	Status         string      `json:"status"`
	DisabledReason *string     `json:"disabled_reason"`
	FailingSince   *int64      `json:"failing_since"`
	Backlog        backlogJSON `json:"backlog"`
	Hour           windowJSON  `json:"hour"`
	Day            windowJSON  `json:"day"`
	Week           windowJSON  `json:"week"`
	// Hourly is Day hour by hour, oldest first, the last the hour that holds now: always 24.
	Hourly [24]hourJSON `json:"hourly"`
}

// successRate is ws's rate to four decimals, or nil without attempts.
func successRate(ws driver.WindowStats) *float64 {
	if ws.Attempts() == 0 {
		return nil
	}
	rate := math.Round(ws.SuccessRate()*10000) / 10000
	return &rate
}

func windowView(ws driver.WindowStats) windowJSON {
	v := windowJSON{Attempts: ws.Attempts(), Delivered: ws.Delivered, Failed: ws.Failed, Abandoned: ws.Abandoned,
		SuccessRate: successRate(ws)}
	if ws.Latency.Count() > 0 {
		ms := func(q float64) int64 {
			return int64(math.Ceil(float64(ws.Latency.Quantile(q)) / float64(time.Millisecond)))
		}
		v.LatencyMS = &latencyJSON{P50: ms(0.5), P99: ms(0.99)}
	}
	return v
}

// stats handles GET webhook_endpoints/{id}/stats.
func (h *DeliveriesHandler) stats(w http.ResponseWriter, r *http.Request) {
	if h == nil || h.log == nil {
		apierror.Write(w, r, errZeroDeliveriesHandler)
		return
	}
	ep, ok := h.liveEndpoint(w, r)
	if !ok {
		return
	}
	if _, err := apierror.ParseQuery(r); err != nil {
		h.errs.Write(w, r, err)
		return
	}
	now := h.now()
	st, err := h.log.(driver.StatsReader).StreamStats(r.Context(), ep.ID, now)
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	view := wire(ep, now)
	out := statsJSON{Object: "webhook_endpoint_stats", Endpoint: ep.ID, Status: view.Status,
		DisabledReason: view.DisabledReason, FailingSince: view.FailingSince,
		Backlog: backlogJSON{Events: st.Backlog},
		Hour:    windowView(st.Hour), Day: windowView(st.Day), Week: windowView(st.Week)}
	// driver.StreamStats.Hourly's buckets: the last starts at now's hour, each one an hour after
	// the one before.
	first := now.Truncate(time.Hour).Add(-time.Duration(len(st.Hourly)-1) * time.Hour)
	for i, ws := range st.Hourly {
		out.Hourly[i] = hourJSON{Start: first.Add(time.Duration(i) * time.Hour).Unix(), Attempts: ws.Attempts(),
			Delivered: ws.Delivered, Failed: ws.Failed, Abandoned: ws.Abandoned, SuccessRate: successRate(ws)}
	}
	if st.Backlog > 0 && !st.Oldest.IsZero() {
		age := int64(max(now.Sub(st.Oldest), 0) / time.Second)
		out.Backlog.OldestAge = &age
	}
	h.writeJSON(w, r, http.StatusOK, out)
}

// redeliveryJSON is the answer of resend and recover: what was queued.
type redeliveryJSON struct {
	Object   string `json:"object"` // "webhook_redelivery"
	Endpoint string `json:"endpoint"`
	From     uint64 `json:"from"`
	To       uint64 `json:"to"`
	// Queued counts the events queued to be pushed again: those of the range that were delivered or
	// abandoned, and not queued already. An event not delivered yet goes out anyway.
	Queued int `json:"queued"`
}

// resend handles POST webhook_endpoints/{id}/events/{sequence}/resend.
func (h *DeliveriesHandler) resend(w http.ResponseWriter, r *http.Request) {
	if h == nil || h.log == nil {
		apierror.Write(w, r, errZeroDeliveriesHandler)
		return
	}
	seq, err := strconv.ParseUint(r.PathValue("sequence"), 10, 64)
	if err != nil || seq < 1 {
		h.refuse(w, r, apierror.Invalid(apierror.Path("sequence", CodeOutOfRange, "must be an event's sequence, 1 or more")))
		return
	}
	ep, ok := h.liveEndpoint(w, r)
	if !ok {
		return
	}
	h.redeliver(w, r, ep, seq, seq, apierror.Path("sequence", CodeEventsPruned, "is past the retention window"), func() error {
		// Nothing queued: the event may not exist yet, or be pending already.
		if _, err := h.log.Status(r.Context(), ep.ID, seq); errors.Is(err, driver.ErrNotFound) {
			return apierror.NotFound(CodeEventNotFound, fmt.Sprintf("webhook endpoint %s has no event %d", strconv.Quote(ep.ID), seq),
				apierror.Path("sequence", CodeEventNotFound, "names no event of the endpoint's stream"))
		} else if err != nil {
			return err
		}
		return nil
	})
}

// recover handles POST webhook_endpoints/{id}/recover {"from","to"}.
func (h *DeliveriesHandler) recover(w http.ResponseWriter, r *http.Request) {
	if h == nil || h.log == nil {
		apierror.Write(w, r, errZeroDeliveriesHandler)
		return
	}
	var in struct {
		From *uint64 `json:"from"`
		To   *uint64 `json:"to"`
	}
	if err := apierror.Decode(r, &in, nil); err != nil {
		h.refuse(w, r, err)
		return
	}
	var c apierror.Collector
	c.Check(in.From != nil, apierror.Body("/from", apierror.CodeFieldMissing, "the first sequence to push again"))
	c.Check(in.To != nil, apierror.Body("/to", apierror.CodeFieldMissing, "the last sequence to push again"))
	if in.From != nil && in.To != nil {
		from, to := *in.From, *in.To
		if c.Check(from >= 1, apierror.Body("/from", CodeOutOfRange, "must be 1 or more")) &&
			c.Check(to >= from, apierror.Body("/to", CodeOutOfRange, "must not be before from")) {
			c.Check(to-from < uint64(h.maxRecover), apierror.Body("/to", CodeRangeTooLarge,
				fmt.Sprintf("a recovery pushes at most %d events: split the range", h.maxRecover)))
		}
	}
	if err := c.Err(); err != nil {
		h.refuse(w, r, err)
		return
	}
	ep, ok := h.liveEndpoint(w, r)
	if !ok {
		return
	}
	h.redeliver(w, r, ep, *in.From, *in.To, apierror.Body("/from", CodeEventsPruned, "is past the retention window"), nil)
}

// redeliver queues from..to of ep and answers what was queued; empty, when nothing was, checks
// whether that is an error.
// writeJSON answers v, never cached: the figures change with every attempt.
func (h *DeliveriesHandler) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

func (h *DeliveriesHandler) redeliver(w http.ResponseWriter, r *http.Request, ep Endpoint, from, to uint64, at apierror.Violation, empty func() error) {
	if ep.DisabledReason != "" {
		h.refuse(w, r, apierror.New(http.StatusUnprocessableEntity, CodeEndpointDisabled,
			fmt.Sprintf("webhook endpoint %s is disabled (%s): nothing would be sent; enable it first", strconv.Quote(ep.ID), ep.DisabledReason)))
		return
	}
	n, err := h.log.(driver.Redeliverer).Redeliver(r.Context(), ep.ID, from, to, h.now())
	var pe *driver.PrunedError
	switch {
	case errors.As(err, &pe):
		h.refuse(w, r, apierror.Gone(CodeEventsPruned,
			fmt.Sprintf("events of webhook endpoint %s below sequence %d are past the retention window and gone; the first retained sequence is %d",
				strconv.Quote(ep.ID), pe.FirstRetained, pe.FirstRetained), at).With("first_retained", pe.FirstRetained))
		return
	case err != nil:
		h.refuse(w, r, err)
		return
	case n == 0 && empty != nil:
		if err := empty(); err != nil {
			h.refuse(w, r, err)
			return
		}
	}
	if n > 0 && h.wake != nil {
		h.wake()
	}
	h.writeJSON(w, r, http.StatusAccepted, redeliveryJSON{Object: "webhook_redelivery", Endpoint: ep.ID, From: from, To: to, Queued: n})
}
