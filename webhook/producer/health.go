package producer

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// Delivery health: the Dispatcher disables an endpoint that keeps failing, or that answers 410 Gone,
// and tells its owner.
const (
	// DefaultDisableAfter is how long an endpoint may fail without a success before the Dispatcher
	// disables it, when DispatcherOptions.DisableAfter is 0: five days, as Svix does.
	DefaultDisableAfter = 5 * 24 * time.Hour
	// DefaultMaxRetryAfter is the longest pause an endpoint may ask for with Retry-After when
	// DispatcherOptions.MaxRetryAfter is 0.
	DefaultMaxRetryAfter = time.Hour

	// DisabledFailing is the DisabledReason of an endpoint the Dispatcher disabled because its
	// deliveries failed for DispatcherOptions.DisableAfter without a success.
	DisabledFailing = "failing"
	// DisabledGone is the DisabledReason of an endpoint the Dispatcher disabled because it answered
	// a delivery with 410 Gone.
	DisabledGone = "gone"

	// EventEndpointDisabled is the type of the event the Dispatcher publishes to an owner's other
	// endpoints when it disables one of theirs: its data holds the endpoint as the endpoints API shows
	// it (without secret and delivery headers), the reason, failing_since and the last error
	// (docs/decisions.md D18).
	EventEndpointDisabled = "webhook_endpoint.disabled"
)

// endpointDisabledData is the data of a webhook_endpoint.disabled event: which endpoint the
// Dispatcher disabled, why, and the failure that decided it. The endpoint is shown as the endpoints
// API shows it, without its delivery headers, which the owner's other endpoints have no need to see.
type endpointDisabledData struct {
	Endpoint endpointView `json:"endpoint"`
	// Reason is DisabledFailing or DisabledGone.
	Reason string `json:"reason"`
	// FailingSince is when the endpoint's deliveries started failing (unix seconds); null for a 410.
	FailingSince *int64 `json:"failing_since"`
	// LastError is the attempt that decided it.
	LastError attemptError `json:"last_error"`
}

// endpointView is a webhook endpoint as an event about it shows it: the endpoints API's object
// without the secret and the delivery headers.
type endpointView struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"` // "webhook_endpoint"
	URL            string            `json:"url"`
	Description    string            `json:"description"`
	APIVersion     string            `json:"api_version"`
	EnabledEvents  []string          `json:"enabled_events"`
	Metadata       map[string]string `json:"metadata"`
	Status         string            `json:"status"`
	DisabledReason *string           `json:"disabled_reason"`
	DisabledAt     *int64            `json:"disabled_at"`
	RateLimit      *int              `json:"rate_limit"`
}

// attemptError is a failed delivery attempt as an event shows it.
type attemptError struct {
	// Sequence is the event the attempt delivered.
	Sequence uint64 `json:"sequence"`
	// At is when the attempt was made (unix seconds).
	At int64 `json:"at"`
	// StatusCode is the answer's status; null when there was none (a timeout, a refused connection).
	StatusCode *int `json:"status_code"`
	// Class and Reason are the history's (ClassStatus, "status 503").
	Class  string `json:"class"`
	Reason string `json:"reason"`
}

// runHealth is what one run of an endpoint's deliveries tells about its health.
type runHealth struct {
	delivered bool           // an attempt succeeded
	failed    bool           // an attempt failed by the endpoint's doing
	last      driver.Attempt // the last such failure
	seq       uint64         // its event
	// resume, when not zero, is when the run's settlements let the endpoint be claimed again: it was
	// throttled, or asked for a pause.
	resume time.Time
}

// heldUntil notes that the run held the endpoint back until t.
func (h *runHealth) heldUntil(t time.Time) {
	if t.After(h.resume) {
		h.resume = t
	}
}

// countsAgainst reports whether a failed attempt counts against the endpoint's health: not one that
// is our own doing (the event could not be rendered or signed) or our shutdown's.
func countsAgainst(r *result) bool {
	return r.Class != "" && !r.cancelled && r.Class != ClassRender && r.Class != ClassNoSecret
}

// note adds an attempt's outcome to h.
func (h *runHealth) note(seq uint64, r *result) {
	switch {
	case r.Class == "":
		h.delivered = true
	case countsAgainst(r):
		h.failed, h.last, h.seq = true, r.Attempt, seq
	}
}

// errUnchanged stops an UpdateEndpoint whose change is no longer needed.
var errUnchanged = errors.New("producer: endpoint health unchanged")

// checkHealth keeps the endpoint's FailingSince and disables it when a run says so: a 410 Gone
// disables it at once; a failure starts its failing period, and one past DisableAfter disables it; a
// success ends the period. It needs a registry that is an EndpointEditor; each change re-reads the
// endpoint under the registry's lock, so replicas that see the same failure disable it once.
func (d *Dispatcher) checkHealth(ctx context.Context, ep Endpoint, h runHealth) {
	ed, ok := d.endpoints.(driver.EndpointEditor)
	if !ok || d.disableAfter < 0 || (!h.delivered && !h.failed) {
		return
	}
	ctx = context.WithoutCancel(ctx)
	at := h.last.At
	switch {
	case h.failed && h.last.StatusCode == http.StatusGone:
		d.disable(ctx, ed, ep.ID, DisabledGone, h)
	case h.failed && !h.delivered && !ep.FailingSince.IsZero() && at.Sub(ep.FailingSince) >= d.disableAfter:
		d.disable(ctx, ed, ep.ID, DisabledFailing, h)
	case h.failed && (ep.FailingSince.IsZero() || h.delivered):
		// The failing period starts (again, after a success in the same run).
		d.editHealth(ctx, ed, ep.ID, func(e *Endpoint) error {
			if e.DisabledReason != "" || (!e.FailingSince.IsZero() && !h.delivered) {
				return errUnchanged
			}
			e.FailingSince = at
			return nil
		})
	case h.delivered && !h.failed && !ep.FailingSince.IsZero():
		d.editHealth(ctx, ed, ep.ID, func(e *Endpoint) error {
			if e.FailingSince.IsZero() {
				return errUnchanged
			}
			e.FailingSince = time.Time{}
			return nil
		})
	}
}

// editHealth runs an UpdateEndpoint of the health checks and reports whether it stored a change.
func (d *Dispatcher) editHealth(ctx context.Context, ed driver.EndpointEditor, id string, change func(*Endpoint) error) (Endpoint, bool) {
	ep, err := ed.UpdateEndpoint(ctx, id, change)
	switch {
	case err == nil:
		return ep, true
	case errors.Is(err, errUnchanged), errors.Is(err, ErrUnknownEndpoint):
	default:
		d.logger.ErrorContext(ctx, "producer: recording endpoint health failed", "endpoint", id, "error", err)
	}
	return Endpoint{}, false
}

// disable disables the endpoint for reason — unless it is disabled already, or, for
// DisabledFailing, a success has ended its failing period meanwhile — and tells its owner.
func (d *Dispatcher) disable(ctx context.Context, ed driver.EndpointEditor, id, reason string, h runHealth) {
	now := d.now()
	ep, changed := d.editHealth(ctx, ed, id, func(e *Endpoint) error {
		if e.DisabledReason != "" {
			return errUnchanged
		}
		if reason == DisabledFailing && (e.FailingSince.IsZero() || h.last.At.Sub(e.FailingSince) < d.disableAfter) {
			return errUnchanged
		}
		e.DisabledReason, e.DisabledAt = reason, now
		return nil
	})
	if changed {
		d.tellDisabled(ctx, ep, h)
	}
}

// tellDisabled tells that the Dispatcher disabled ep: in the log, to the hooks, and by a
// webhook_endpoint.disabled event to the owner's other endpoints that subscribe to it (when the
// registry can list them).
func (d *Dispatcher) tellDisabled(ctx context.Context, ep Endpoint, h runHealth) {
	attrs := []any{"endpoint", ep.ID, "owner", ep.Owner, "reason", ep.DisabledReason, "last_error", h.last.Reason}
	if !ep.FailingSince.IsZero() {
		attrs = append(attrs, "failing_since", ep.FailingSince)
	}
	d.logger.WarnContext(ctx, "producer: endpoint disabled", attrs...)
	if o := d.hooks; o != nil && o.EndpointDisabled != nil {
		o.EndpointDisabled(ctx, EndpointDisabledInfo{Endpoint: ep.ID, Reason: ep.DisabledReason,
			StatusCode: h.last.StatusCode, Class: h.last.Class})
	}
	lister, ok := d.endpoints.(driver.EndpointLister)
	if !ok || d.notices == nil {
		return
	}
	var others []Endpoint
	q := driver.EndpointQuery{Owner: ep.Owner, Limit: DefaultMaxFanOut}
	for {
		page, more, err := lister.ListEndpoints(ctx, q)
		if err != nil {
			d.logger.ErrorContext(ctx, "producer: listing the endpoints to tell of a disabled one failed",
				"endpoint", ep.ID, "error", err)
			return
		}
		for _, o := range page {
			if o.ID != ep.ID {
				others = append(others, o)
			}
		}
		if !more || len(page) == 0 || len(others) >= DefaultMaxFanOut {
			break
		}
		q.After = page[len(page)-1].ID
	}
	evs, err := d.notices.PublishToEach(ctx, others, EventEndpointDisabled, disabledData(ep, h))
	if err != nil {
		d.logger.ErrorContext(ctx, "producer: publishing webhook_endpoint.disabled failed", "endpoint", ep.ID, "error", err)
		return
	}
	if len(evs) > 0 {
		d.Wake()
	}
}

// disabledData is the data of the webhook_endpoint.disabled event for ep.
func disabledData(ep Endpoint, h runHealth) endpointDisabledData {
	w := wire(ep, time.Time{})
	out := endpointDisabledData{
		Endpoint: endpointView{ID: w.ID, Object: w.Object, URL: w.URL, Description: w.Description, APIVersion: w.APIVersion,
			EnabledEvents: w.EnabledEvents, Metadata: w.Metadata, Status: w.Status, DisabledReason: w.DisabledReason,
			DisabledAt: w.DisabledAt, RateLimit: w.RateLimit},
		Reason:       ep.DisabledReason,
		FailingSince: unixOrNil(ep.FailingSince),
		LastError:    attemptError{Sequence: h.seq, At: h.last.At.Unix(), Class: h.last.Class, Reason: h.last.Reason},
	}
	if h.last.StatusCode != 0 {
		code := h.last.StatusCode
		out.LastError.StatusCode = &code
	}
	return out
}
