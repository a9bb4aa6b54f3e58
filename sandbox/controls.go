package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/webhook"
)

// DefaultControlsPrefix is where Controls serve unless told otherwise.
const DefaultControlsPrefix = "/v1/sandbox"

// DefaultTestEventType is the type of a triggered event when the request names none.
const DefaultTestEventType = "sandbox.test"

// ErrUnknownEndpoint is what hooks return for a webhook endpoint that does not exist or is not the
// caller's; Controls answer both with the same 404.
var ErrUnknownEndpoint = errors.New("sandbox: unknown webhook endpoint")

// TriggerRequest is the body of POST {prefix}/events; every member is optional, so the zero value
// asks for one DefaultTestEventType event with data {} on every endpoint of the caller:
//
//	{"type":"order.created","endpoint":"we_123","data":{"id":"ord_1"}}
type TriggerRequest struct {
	// Type is the event type; empty means DefaultTestEventType.
	Type string `json:"type"`
	// Endpoint limits the event to one of the caller's endpoints; empty means all of them.
	Endpoint string `json:"endpoint"`
	// Data is the event's data object; empty means {}.
	Data json.RawMessage `json:"data"`
}

// Triggered is one event a Trigger hook emitted, on one endpoint. Its Event.Sequence is 0 (and left
// out of the JSON) when the producer's log numbers events after they commit, as pgstore.EventLog
// does: the number is assigned a moment later, and the delivery and range retrieval carry it. It is a
// plain value; the zero Triggered names no endpoint and no event.
type Triggered struct {
	Endpoint string        `json:"endpoint"`
	Event    webhook.Event `json:"event"`
}

// Hooks connect the sandbox controls to the application. Each receives the caller's principal, which
// is always a sandbox one, and must confine itself to that principal's data. A nil hook leaves its
// control out: its route answers like an unknown one. The zero Hooks has none, and NewControls
// refuses it.
//
// A hook refuses a request by returning an *apierror.Error with a 4xx status (a quota reached, an
// event too large): the controls write it as it is. A hook that refuses must have done nothing — a
// Trigger publishes to all its endpoints or to none — because the refusal is not stored as the
// request's Idempotency-Key response (idempotency.NotPerformed): the same request may run once its
// cause is gone. Any other error is the opaque 500, which is stored like any completed response.
type Hooks struct {
	// Trigger emits a test event to the caller's endpoints (or only req.Endpoint) through the normal
	// delivery path, and returns what it emitted. An endpoint that is unknown or not the caller's is
	// ErrUnknownEndpoint.
	Trigger func(ctx context.Context, p apikey.Principal, req TriggerRequest) ([]Triggered, error)
	// SetFaults sets the faults of one of the caller's endpoints (the zero Faults clears them), for
	// instance in the FaultTable its producer's FaultTransport reads. f is already validated. An
	// endpoint that is unknown or not the caller's is ErrUnknownEndpoint.
	SetFaults func(ctx context.Context, p apikey.Principal, endpointID string, f Faults) error
	// Reset deletes the caller's sandbox data (every record stored under p.Scope(), its events and
	// faults), leaving its credentials and endpoints in place.
	Reset func(ctx context.Context, p apikey.Principal) error
}

// ControlsOptions tune Controls. A nil *ControlsOptions and the zero value mean the defaults.
type ControlsOptions struct {
	// Prefix is the path the controls live under; empty means DefaultControlsPrefix.
	Prefix string
	// NotFound answers requests the controls refuse: production keys, requests without a principal,
	// and paths that name no control. Give it the application's own not-found handler so that a
	// production key cannot tell the controls exist; nil means Problems.NotFoundHandler() (apierror.RouteNotFound).
	NotFound http.Handler
	// Problems writes the problem responses (its TypeBase and Logger). Fields left empty come from the
	// Writer apierror.Writer.Handler put in the request's context, else apierror's defaults.
	Problems apierror.Writer
	// Logger records hook failures; nil logs nothing.
	Logger *slog.Logger
}

// Controls serve the sandbox-only controls, behind the apikey.Authenticator:
//
//	POST   {prefix}/events                              trigger a test event   → 201 {"object":"list","data":[{"endpoint":…,"event":{…}}],"has_more":false}
//	PUT    {prefix}/webhook_endpoints/{id}/faults       set an endpoint's faults → 200 {"object":"webhook_faults","endpoint":…,"drop":…,…}
//	DELETE {prefix}/webhook_endpoints/{id}/faults       clear them                → 200 (the zero faults)
//	POST   {prefix}/reset                               reset the evaluation's data → 204
//
// A production key, or no principal, gets exactly the response of an unknown route (ControlsOptions.
// NotFound), whatever the method and path: production callers cannot reach, or even detect, the
// controls. Controls are safe for concurrent use. Build them with NewControls; the zero value is not
// usable: it answers every request with the opaque 500 (ErrNotBuilt).
type Controls struct {
	hooks    Hooks
	prefix   string
	notFound http.Handler
	writer   apierror.Writer
	log      *slog.Logger
}

var _ http.Handler = (*Controls)(nil)

// NewControls returns the controls wired to h. A nil hook leaves its control out: its path answers like
// an unknown route. Hooks with none set, and a Prefix that is not an absolute path, are errors.
func NewControls(h Hooks, opts *ControlsOptions) (*Controls, error) {
	if h.Trigger == nil && h.SetFaults == nil && h.Reset == nil {
		return nil, errors.New("sandbox: NewControls needs at least one hook: Trigger, SetFaults or Reset")
	}
	c := &Controls{hooks: h, prefix: DefaultControlsPrefix}
	if opts != nil {
		if opts.Prefix != "" {
			if !strings.HasPrefix(opts.Prefix, "/") || strings.ContainsAny(opts.Prefix, "?#") {
				return nil, fmt.Errorf("sandbox: NewControls: Prefix %q is not an absolute path", opts.Prefix)
			}
			c.prefix = strings.TrimRight(opts.Prefix, "/")
		}
		c.notFound, c.writer, c.log = opts.NotFound, opts.Problems, opts.Logger
	}
	if c.notFound == nil {
		c.notFound = c.writer.NotFoundHandler()
	}
	return c, nil
}

// ServeHTTP implements http.Handler.
func (c *Controls) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c == nil || c.notFound == nil {
		apierror.Write(w, r, errZeroControls)
		return
	}
	p, ok := apikey.FromContext(r.Context())
	if !ok || p.Environment != apikey.Sandbox {
		c.notFound.ServeHTTP(w, r)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, c.prefix+"/")
	if !ok {
		c.notFound.ServeHTTP(w, r)
		return
	}
	switch {
	case rest == "events" && c.hooks.Trigger != nil:
		if c.allow(w, r, http.MethodPost) {
			c.trigger(w, r, p)
		}
	case rest == "reset" && c.hooks.Reset != nil:
		if c.allow(w, r, http.MethodPost) {
			c.reset(w, r, p)
		}
	case faultsPath(rest) != "" && c.hooks.SetFaults != nil:
		if c.allow(w, r, http.MethodPut, http.MethodDelete) {
			c.faults(w, r, p, faultsPath(rest))
		}
	default:
		c.notFound.ServeHTTP(w, r)
	}
}

// faultsPath returns the endpoint ID of "webhook_endpoints/{id}/faults", or "" for any other path.
func faultsPath(rest string) string {
	mid, ok := strings.CutPrefix(rest, "webhook_endpoints/")
	if !ok {
		return ""
	}
	id, ok := strings.CutSuffix(mid, "/faults")
	if !ok || id == "" || strings.Contains(id, "/") {
		return ""
	}
	return id
}

func (c *Controls) allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	c.refuse(w, r, apierror.MethodNotAllowed(r.Method, methods...))
	return false
}

// refuse writes the answer to a request refused before anything was done: its input failed to decode
// or validate, it named an endpoint that is not the caller's, or a hook refused it (a 4xx
// *apierror.Error). Under the idempotency middleware its key is released rather than stored
// (idempotency.NotPerformed, which marks 4xx answers only), so a corrected request, or the same one
// once a quota has room again, may reuse the key; docs/decisions.md D2 has requests rejected before
// the work store nothing. Without the middleware the mark does nothing.
func (c *Controls) refuse(w http.ResponseWriter, r *http.Request, err error) {
	idempotency.NotPerformed(w)
	c.writer.Write(w, r, err)
}

// refused reports a hook's error that is a refusal: an *apierror.Error with a 4xx status.
func refused(err error) bool {
	var p *apierror.Error
	return errors.As(err, &p) && p.Status >= 400 && p.Status < 500
}

// maxControlBody caps control request bodies: they are a few small members.
const maxControlBody = 64 << 10

func (c *Controls) trigger(w http.ResponseWriter, r *http.Request, p apikey.Principal) {
	req, err := decodeTrigger(r)
	if err != nil {
		c.refuse(w, r, err)
		return
	}
	out, err := c.hooks.Trigger(r.Context(), p, req)
	switch {
	case errors.Is(err, ErrUnknownEndpoint):
		c.refuse(w, r, apierror.NotFound("webhook_endpoint_not_found", "body /endpoint: no webhook endpoint of yours has this ID",
			apierror.Body("/endpoint", "webhook_endpoint_not_found", "no webhook endpoint of yours has this ID")))
		return
	case refused(err):
		c.refuse(w, r, err)
		return
	case err != nil:
		c.fail(w, r, "trigger", err)
		return
	}
	if out == nil {
		out = []Triggered{}
	}
	c.writeJSON(w, r, http.StatusCreated, struct {
		Object  string      `json:"object"`
		Data    []Triggered `json:"data"`
		HasMore bool        `json:"has_more"`
	}{"list", out, false})
}

// decodeTrigger reads the optional body of a trigger request: an empty body means all defaults.
func decodeTrigger(r *http.Request) (TriggerRequest, error) {
	var req TriggerRequest
	if r.Body != nil {
		data, err := io.ReadAll(io.LimitReader(r.Body, maxControlBody+1))
		if err != nil {
			return req, apierror.Invalid(apierror.Body("", "body_unreadable", "the request body could not be read completely"))
		}
		if len(data) > maxControlBody {
			return req, apierror.BodyTooLarge(maxControlBody)
		}
		if len(strings.TrimSpace(string(data))) > 0 {
			if err := apierror.RequireJSON(r); err != nil {
				return req, err
			}
			if err := apierror.DecodeBytes(data, &req, nil); err != nil {
				return req, err
			}
		}
	}
	if req.Type == "" {
		req.Type = DefaultTestEventType
	}
	var v apierror.Collector
	v.Check(validEventType(req.Type), apierror.Body("/type", "invalid_event_type",
		"must be dot-separated lowercase words such as order.created, at most 100 bytes"))
	if len(req.Data) == 0 || string(req.Data) == "null" {
		req.Data = json.RawMessage(`{}`)
	} else {
		v.Check(strings.HasPrefix(strings.TrimSpace(string(req.Data)), "{"),
			apierror.Body("/data", apierror.CodeWrongType, "must be an object"))
	}
	return req, v.Err()
}

// validEventType accepts "word.word…" with words of [a-z0-9_] starting with a letter.
func validEventType(s string) bool {
	if len(s) == 0 || len(s) > 100 {
		return false
	}
	words := strings.Split(s, ".")
	if len(words) < 2 {
		return false
	}
	for _, w := range words {
		if w == "" || w[0] < 'a' || w[0] > 'z' {
			return false
		}
		for i := 0; i < len(w); i++ {
			if c := w[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
				return false
			}
		}
	}
	return true
}

func (c *Controls) faults(w http.ResponseWriter, r *http.Request, p apikey.Principal, id string) {
	var f Faults
	if r.Method == http.MethodPut {
		if err := apierror.Decode(r, &f, &apierror.DecodeOptions{MaxBytes: maxControlBody}); err != nil {
			c.refuse(w, r, err)
			return
		}
		if err := f.Validate(); err != nil {
			c.refuse(w, r, err)
			return
		}
	}
	err := c.hooks.SetFaults(r.Context(), p, id, f)
	switch {
	case errors.Is(err, ErrUnknownEndpoint):
		c.refuse(w, r, apierror.NotFound("webhook_endpoint_not_found", "path id: no webhook endpoint of yours has this ID",
			apierror.Path("id", "webhook_endpoint_not_found", "no webhook endpoint of yours has this ID")))
		return
	case refused(err):
		c.refuse(w, r, err)
		return
	case err != nil:
		c.fail(w, r, "set faults", err)
		return
	}
	c.writeJSON(w, r, http.StatusOK, struct {
		Object   string `json:"object"`
		Endpoint string `json:"endpoint"`
		Faults
	}{"webhook_faults", id, f})
}

func (c *Controls) reset(w http.ResponseWriter, r *http.Request, p apikey.Principal) {
	if err := c.hooks.Reset(r.Context(), p); refused(err) {
		c.refuse(w, r, err)
		return
	} else if err != nil {
		c.fail(w, r, "reset", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// fail writes a hook's error: an *apierror.Error as it is, anything else as the opaque 500.
func (c *Controls) fail(w http.ResponseWriter, r *http.Request, control string, err error) {
	var p *apierror.Error
	if c.log != nil && !errors.As(err, &p) {
		c.log.ErrorContext(r.Context(), "sandbox: control failed", "control", control,
			"request_id", apierror.RequestIDFromContext(r.Context()), "error", apierror.Redact(err.Error()))
	}
	c.writer.Write(w, r, err)
}

func (c *Controls) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// A hook returned an event whose data is not valid JSON.
		c.fail(w, r, "encode response", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
