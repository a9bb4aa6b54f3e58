package producer

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/svcplatform/conventions"
	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/internal/randid"
	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/internal/epcheck"
)

// Defaults and bounds of the endpoints API.
const (
	// DefaultMaxEndpoints is the most live endpoints a licensee registers when
	// EndpointsHandlerOptions.MaxEndpoints is 0: Stripe's limit.
	DefaultMaxEndpoints = 16
	// DefaultRollExpiry is how long a rolled secret keeps signing when roll_secret names no
	// expires_in; MaxRollExpiry is the longest it may.
	DefaultRollExpiry = 24 * time.Hour
	MaxRollExpiry     = 7 * 24 * time.Hour
	// DisabledManual is the DisabledReason of an endpoint its owner disabled (DisabledFailing and
	// DisabledGone are the Dispatcher's).
	DisabledManual = "manual"
)

// Problem codes of the endpoints API, beside CodeEndpointNotFound and those of a refused URL
// (ssrf.URLError's codes, located at /url).
const (
	// CodeEndpointLimitReached: a registration past EndpointsHandlerOptions.MaxEndpoints (422).
	CodeEndpointLimitReached = "webhook_endpoint_limit_reached"
	// CodeUnknownEventType: enabled_events names a type the catalogue does not declare.
	CodeUnknownEventType = epcheck.CodeUnknownEventType
	// CodeUnsupportedVersion: api_version names a version the API does not serve.
	CodeUnsupportedVersion = "unsupported_api_version"
	// CodeInvalidSetting: a setting breaks its bounds (the detail says which).
	CodeInvalidSetting = "invalid_setting"
)

// EventType is one entry of the event catalogue a server declares: what GET /v1/event_types lists
// and what an endpoint's enabled_events may name. It is a plain value; the zero value is not a
// valid entry (NewEndpointsHandler refuses an empty Type).
type EventType struct {
	// Type is the event's type, as in webhook.Event.Type ("order.created").
	Type string
	// Description says when the event is sent.
	Description string
	// Schema references the schema of the event's data in the API's OpenAPI document
	// ("#/components/schemas/Order"); empty for none.
	Schema string
}

// EndpointsHandlerOptions configures an EndpointsHandler. The zero value (or nil) means the
// defaults.
type EndpointsHandlerOptions struct {
	// EventTypes is the catalogue: GET event_types lists it in this order, and enabled_events may
	// name only its types (or "*"). Empty: the catalogue lists nothing and any well-formed type is
	// accepted.
	EventTypes []EventType
	// URLPolicy returns the policy a URL must pass at registration and at every change, for the
	// request's caller (production keys https only, sandbox keys http too, say); nil means the zero
	// ssrf.URLPolicy: https, the default guard.
	URLPolicy func(r *http.Request) ssrf.URLPolicy
	// APIVersion returns the api_version of an endpoint registered without one: normally the
	// licensee's pinned version. nil means none (events go out as stored).
	APIVersion func(r *http.Request) string
	// APIVersions returns the versions api_version may name; nil means any well-formed name.
	APIVersions func() []string
	// MaxEndpoints bounds a licensee's live endpoints (deleted ones free their slot); 0 means
	// DefaultMaxEndpoints, negative means no bound.
	MaxEndpoints int
	// Now is the clock of creation, disabling, deletion and a roll's expiry; nil means time.Now.
	Now func() time.Time
	// Problems writes the problem responses, as for DeliveriesHandlerOptions.
	Problems apierror.Writer
	// Logger records internal errors (the client sees an opaque 500); nil means no logging.
	Logger *slog.Logger
}

// EndpointsHandler serves the webhook endpoint API a licensee manages its endpoints with, on any
// registry that lists and edits them (memstore.Endpoints, pgstore.EndpointStore):
//
//	POST   /v1/webhook_endpoints                   register: url, description, enabled_events,
//	                                               api_version, metadata, headers; the secret is shown once
//	GET    /v1/webhook_endpoints                   the licensee's live endpoints, oldest first
//	GET    /v1/webhook_endpoints/{id}              one endpoint, without its secret
//	PATCH  /v1/webhook_endpoints/{id}              change url, description, enabled_events, api_version,
//	                                               metadata, headers, status (enabled, disabled)
//	DELETE /v1/webhook_endpoints/{id}              delete; its events stay readable by range
//	POST   /v1/webhook_endpoints/{id}/roll_secret  a new secret, shown once; the old one signs too until
//	                                               expires_in seconds have passed (default a day, at most 7)
//	GET    /v1/event_types                         the event catalogue
//
// Register mounts them on a ServeMux. Another licensee's endpoint, and a deleted one, is the same
// 404 (CodeEndpointNotFound) as one that does not exist. Bodies are decoded strictly, and every
// violation is located in the body (a refused URL at /url with the guard's code). PATCH follows JSON
// merge patch (RFC 7386): absent members are left as they are, and within metadata and headers a
// member set to null is removed (metadata: null removes them all); header names are matched without
// regard to case, so x-tenant replaces or removes a stored X-Tenant. Each change is one atomic update
// of the registry (driver.EndpointEditor), which the Dispatcher and the range handler read on their
// next delivery or request, on every replica. Refusals mark the request idempotency.NotPerformed, and
// answers that carry a secret idempotency.Secret, for the idempotency middleware the mutating routes
// go behind.
//
// An EndpointsHandler is safe for concurrent use. Build one with NewEndpointsHandler; the zero value
// answers every request with the opaque 500 (ErrNotBuilt).
type EndpointsHandler struct {
	reg      endpointRegistry
	licensee conventions.CallerFunc
	types    []EventType
	policy   func(r *http.Request) ssrf.URLPolicy
	version  func(r *http.Request) string
	versions func() []string
	max      int
	now      func() time.Time
	errs     apierror.Writer
}

// endpointRegistry is what the EndpointsHandler needs of a registry.
type endpointRegistry interface {
	driver.Endpoints
	driver.EndpointLister
	driver.EndpointEditor
}

// NewEndpointsHandler returns the endpoints API on reg, which must list and edit endpoints;
// licensee maps each request to the licensee it is authenticated as (the endpoints' Owner), as for
// NewRangeHandler. A nil reg or licensee, a registry that cannot list or edit, or an event type
// without a name or declared twice, is an error.
func NewEndpointsHandler(reg driver.Endpoints, licensee conventions.CallerFunc, opts *EndpointsHandlerOptions) (*EndpointsHandler, error) {
	r, ok := reg.(endpointRegistry)
	switch {
	case reg == nil:
		return nil, errors.New("producer: NewEndpointsHandler needs Endpoints")
	case !ok:
		return nil, fmt.Errorf("producer: NewEndpointsHandler: %T cannot list and edit endpoints (driver.EndpointLister, driver.EndpointEditor)", reg)
	case licensee == nil:
		return nil, errors.New("producer: NewEndpointsHandler needs a licensee CallerFunc")
	}
	var o EndpointsHandlerOptions
	if opts != nil {
		o = *opts
	}
	h := &EndpointsHandler{reg: r, licensee: licensee, types: slices.Clone(o.EventTypes), policy: o.URLPolicy,
		version: o.APIVersion, versions: o.APIVersions, max: cmp.Or(o.MaxEndpoints, DefaultMaxEndpoints), now: o.Now,
		errs: o.Problems}
	for i, et := range h.types {
		if et.Type == "" || epcheck.EnabledEvents([]string{et.Type}, nil) != nil || et.Type == epcheck.Wildcard {
			return nil, fmt.Errorf("producer: NewEndpointsHandler: event type %d has no valid name", i)
		}
		if slices.ContainsFunc(h.types[:i], func(x EventType) bool { return x.Type == et.Type }) {
			return nil, fmt.Errorf("producer: NewEndpointsHandler: event type %q is declared twice", et.Type)
		}
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.errs.Logger == nil {
		h.errs.Logger = o.Logger
	}
	return h, nil
}

// Register mounts the endpoints API on mux under the version segment version ("" for none, when a
// router strips it, as versioning.Router does), each mutating route — POST, PATCH, DELETE — wrapped
// by mutating (the idempotency middleware; nil mounts them bare).
func (h *EndpointsHandler) Register(mux *http.ServeMux, version string, mutating func(http.Handler) http.Handler) {
	if mutating == nil {
		mutating = func(next http.Handler) http.Handler { return next }
	}
	p := func(method, path string) string {
		if version == "" {
			return method + " " + path
		}
		return method + " /" + version + path
	}
	mux.Handle(p(http.MethodPost, "/webhook_endpoints"), mutating(http.HandlerFunc(h.create)))
	mux.HandleFunc(p(http.MethodGet, "/webhook_endpoints"), h.list)
	mux.HandleFunc(p(http.MethodGet, "/webhook_endpoints/{id}"), h.get)
	mux.Handle(p(http.MethodPatch, "/webhook_endpoints/{id}"), mutating(http.HandlerFunc(h.update)))
	mux.Handle(p(http.MethodDelete, "/webhook_endpoints/{id}"), mutating(http.HandlerFunc(h.delete)))
	mux.Handle(p(http.MethodPost, "/webhook_endpoints/{id}/roll_secret"), mutating(http.HandlerFunc(h.roll)))
	mux.HandleFunc(p(http.MethodGet, "/event_types"), h.eventTypes)
}

// endpointJSON is an endpoint on the wire.
type endpointJSON struct {
	ID                      string            `json:"id"`
	Object                  string            `json:"object"`
	URL                     string            `json:"url"`
	APIVersion              string            `json:"api_version"`
	Description             string            `json:"description"`
	EnabledEvents           []string          `json:"enabled_events"`
	Metadata                map[string]string `json:"metadata"`
	Headers                 map[string]string `json:"headers"`
	Status                  string            `json:"status"`
	DisabledReason          *string           `json:"disabled_reason"`
	DisabledAt              *int64            `json:"disabled_at"`
	Created                 *int64            `json:"created"`
	PreviousSecretExpiresAt *int64            `json:"previous_secret_expires_at"`
	RateLimit               *int              `json:"rate_limit"`
	FailingSince            *int64            `json:"failing_since"`
	Secret                  string            `json:"secret,omitempty"`
}

func unixOrNil(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	u := t.Unix()
	return &u
}

// wire renders ep at now, without its secrets.
func wire(ep Endpoint, now time.Time) endpointJSON {
	out := endpointJSON{ID: ep.ID, Object: "webhook_endpoint", URL: ep.URL, APIVersion: ep.APIVersion, Description: ep.Description,
		EnabledEvents: ep.EnabledEvents, Metadata: ep.Metadata, Headers: ep.Headers, Status: "enabled",
		Created: unixOrNil(ep.Created), FailingSince: unixOrNil(ep.FailingSince)}
	if ep.RateLimit > 0 {
		rate := ep.RateLimit
		out.RateLimit = &rate
	}
	if len(out.EnabledEvents) == 0 {
		out.EnabledEvents = []string{epcheck.Wildcard}
	}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	if out.Headers == nil {
		out.Headers = map[string]string{}
	}
	if ep.DisabledReason != "" {
		out.Status = "disabled"
		reason := ep.DisabledReason
		out.DisabledReason, out.DisabledAt = &reason, unixOrNil(ep.DisabledAt)
	}
	if len(ep.SigningSecrets(now)) > 1 && !ep.OldSecretsExpire.IsZero() {
		out.PreviousSecretExpiresAt = unixOrNil(ep.OldSecretsExpire)
	}
	return out
}

// owner returns the request's licensee, or writes the problem.
func (h *EndpointsHandler) owner(w http.ResponseWriter, r *http.Request) (string, bool) {
	if h == nil || h.reg == nil {
		var errs apierror.Writer
		if h != nil {
			errs = h.errs
		}
		errs.Write(w, r, errZeroEndpointsHandler)
		return "", false
	}
	licensee, err := h.licensee(r)
	if err == nil && licensee == "" {
		err = errors.New("producer: EndpointsHandler: the request has no licensee")
	}
	if err != nil {
		h.errs.Write(w, r, err)
		return "", false
	}
	return licensee, true
}

// refuse answers a request refused before anything changed.
func (h *EndpointsHandler) refuse(w http.ResponseWriter, r *http.Request, err error) {
	idempotency.NotPerformed(w)
	h.errs.Write(w, r, err)
}

func (h *EndpointsHandler) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	// Never cached: an endpoint is the integration as it stands, and its URL may carry the consumer's
	// own token.
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// located adds epcheck's problems to c, each located in the body.
func located(c *apierror.Collector, problems []epcheck.Problem) {
	for _, p := range problems {
		c.Add(apierror.Body(p.Pointer, p.Code, p.Detail))
	}
}

// settings are the members a registration and an update share.
type settings struct {
	URL           *string    `json:"url"`
	Description   *string    `json:"description"`
	EnabledEvents *[]string  `json:"enabled_events"`
	APIVersion    *string    `json:"api_version"`
	Metadata      mergePatch `json:"metadata"`
	Headers       mergePatch `json:"headers"`
	RateLimit     nullable   `json:"rate_limit"`
}

// nullable is an integer member that may be absent (set false), null (set, v nil) or a number.
type nullable struct {
	set bool
	v   *int
}

// UnmarshalJSON implements json.Unmarshaler.
func (n *nullable) UnmarshalJSON(b []byte) error {
	n.set = true
	if string(b) == "null" {
		n.v = nil
		return nil
	}
	return json.Unmarshal(b, &n.v)
}

// mergePatch is a string map member of a JSON merge patch: absent (set false), null (set, m nil:
// remove every pair), or an object whose null members remove their key.
type mergePatch struct {
	set bool
	m   map[string]*string
}

// UnmarshalJSON implements json.Unmarshaler.
func (p *mergePatch) UnmarshalJSON(b []byte) error {
	p.set = true
	if string(b) == "null" {
		p.m = nil
		return nil
	}
	return json.Unmarshal(b, &p.m)
}

// apply merges p into m and returns the result (nil when empty). With foldCase, keys are compared
// without regard to case, as header names are: a member replaces or removes the stored key that
// differs from it in case only.
func (p mergePatch) apply(m map[string]string, foldCase bool) map[string]string {
	if !p.set {
		return m
	}
	if p.m == nil {
		return nil
	}
	out := make(map[string]string, len(m)+len(p.m))
	for k, v := range m {
		out[k] = v
	}
	for k, v := range p.m {
		if foldCase {
			for stored := range out {
				if stored != k && strings.EqualFold(stored, k) {
					delete(out, stored)
				}
			}
		}
		if v == nil {
			delete(out, k)
		} else {
			out[k] = *v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// check validates the settings the request sets, into c: the URL against the caller's policy, the
// event types against the catalogue, the version against the supported ones, the rest against
// their bounds (with the values they will have once applied to ep).
func (h *EndpointsHandler) check(c *apierror.Collector, r *http.Request, in *settings, ep Endpoint) error {
	if in.URL != nil {
		var policy ssrf.URLPolicy
		if h.policy != nil {
			policy = h.policy(r)
		}
		var ue *ssrf.URLError
		if err := policy.Check(*in.URL); errors.As(err, &ue) {
			c.Add(apierror.Body("/url", ue.Code, ue.Detail))
		} else if err != nil {
			return err // URLPolicy returns only *URLError: anything else is a bug, an opaque 500
		}
	}
	if in.Description != nil {
		located(c, epcheck.Description(*in.Description))
	}
	if in.EnabledEvents != nil {
		var known func(string) bool
		if len(h.types) > 0 {
			known = func(t string) bool {
				return slices.ContainsFunc(h.types, func(et EventType) bool { return et.Type == t })
			}
		}
		// An empty list is refused rather than read as every type: whoever sends [] means none.
		if len(*in.EnabledEvents) == 0 {
			c.Add(apierror.Body("/enabled_events", epcheck.CodeEmpty, `must list at least one event type, or "*" for every type`))
		}
		located(c, epcheck.EnabledEvents(*in.EnabledEvents, known))
	}
	if in.APIVersion != nil {
		v := *in.APIVersion
		switch {
		case h.versions != nil && !slices.Contains(h.versions(), v):
			c.Add(apierror.Body("/api_version", CodeUnsupportedVersion,
				"must be one of the supported versions: "+strings.Join(h.versions(), ", ")))
		case h.versions == nil && (v == "" || len(v) > 64 || epcheck.EnabledEvents([]string{v}, nil) != nil):
			c.Add(apierror.Body("/api_version", CodeUnsupportedVersion, "must name an API version"))
		}
	}
	if in.Metadata.set {
		located(c, epcheck.Metadata(in.Metadata.apply(ep.Metadata, false)))
	}
	if in.Headers.set {
		located(c, epcheck.Headers(in.Headers.apply(ep.Headers, true)))
	}
	if in.RateLimit.v != nil {
		n := *in.RateLimit.v
		if n == 0 {
			n = -1 // on the wire, none is null: 0 deliveries a second is no rate
		}
		located(c, epcheck.RateLimit(n))
	}
	return nil
}

// applyTo sets what the request sets.
func (in *settings) applyTo(ep *Endpoint) {
	if in.URL != nil {
		ep.URL = *in.URL
	}
	if in.Description != nil {
		ep.Description = *in.Description
	}
	if in.EnabledEvents != nil {
		ep.EnabledEvents = slices.Clone(*in.EnabledEvents)
		if len(ep.EnabledEvents) == 1 && ep.EnabledEvents[0] == epcheck.Wildcard {
			ep.EnabledEvents = nil
		}
	}
	if in.APIVersion != nil {
		ep.APIVersion = *in.APIVersion
	}
	ep.Metadata = in.Metadata.apply(ep.Metadata, false)
	ep.Headers = in.Headers.apply(ep.Headers, true)
	if in.RateLimit.set {
		ep.RateLimit = 0
		if in.RateLimit.v != nil {
			ep.RateLimit = *in.RateLimit.v
		}
	}
}

// create handles POST webhook_endpoints.
func (h *EndpointsHandler) create(w http.ResponseWriter, r *http.Request) {
	owner, ok := h.owner(w, r)
	if !ok {
		return
	}
	var in settings
	if err := apierror.Decode(r, &in, nil); err != nil {
		h.refuse(w, r, err)
		return
	}
	var c apierror.Collector
	c.Require("/url", in.URL != nil)
	if err := h.check(&c, r, &in, Endpoint{}); err != nil {
		h.errs.Write(w, r, err)
		return
	}
	if err := c.Err(); err != nil {
		h.refuse(w, r, err)
		return
	}
	now := h.now()
	ep := Endpoint{ID: randid.New("we_"), Owner: owner, Secrets: []string{webhook.NewSecret()}, Created: now}
	if h.version != nil {
		ep.APIVersion = h.version(r)
	}
	in.applyTo(&ep)
	err := h.reg.CreateEndpoint(r.Context(), ep, max(h.max, 0))
	if errors.Is(err, ErrEndpointLimit) {
		// Nothing was created: the key is released, so the same request may succeed later.
		h.refuse(w, r, endpointLimitReached(h.max))
		return
	}
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	out := wire(ep, now)
	out.Secret = ep.Secrets[0]
	// The signing secret is shown once: never stored in plain text for replay, never cached.
	idempotency.Secret(w)
	w.Header().Set("Location", strings.TrimSuffix(r.URL.Path, "/")+"/"+ep.ID)
	h.writeJSON(w, r, http.StatusCreated, out)
}

// endpointLimitReached is the refusal of a registration past the limit.
//
// Why 422: the request is well-formed and its URL acceptable — the same body would succeed for
// another licensee — so it is not a 400. Not 429: that is a rate, with a Retry-After, and waiting
// never frees an endpoint slot. Not 409: idempotency.Transport, like other clients of this API,
// retries every 409 with the same key (the answer to a key still in use), so a quota refusal as 409
// would be retried in vain. 422 says the request cannot be carried out as it stands, which is the case
// until the licensee deletes an endpoint; GitHub answers its hook limit the same way. The limit is in
// the detail, and the problem is located at the body as a whole: no one field is at fault.
func endpointLimitReached(limit int) *apierror.Error {
	detail := fmt.Sprintf("this licensee already has %d webhook endpoints in this environment, the most allowed; delete one to register another", limit)
	return apierror.Unprocessable(CodeEndpointLimitReached, detail, apierror.Body("", CodeEndpointLimitReached, detail))
}

// endpointList is the answer of GET webhook_endpoints and GET event_types.
type endpointList[T any] struct {
	Object  string `json:"object"` // "list"
	Data    []T    `json:"data"`
	HasMore bool   `json:"has_more"`
}

// listPage bounds how many endpoints one list answer reads when there is no per-licensee limit.
const listPage = 1000

// list handles GET webhook_endpoints: the licensee's live endpoints, oldest first (by Created, then
// ID), in one page — a licensee has at most MaxEndpoints; without a bound, the first 1,000 and
// has_more.
func (h *EndpointsHandler) list(w http.ResponseWriter, r *http.Request) {
	owner, ok := h.owner(w, r)
	if !ok {
		return
	}
	limit := listPage
	if h.max > 0 {
		limit = max(h.max, 1)
	}
	var all []Endpoint
	after, more := "", true
	for more && len(all) < limit {
		var (
			page []Endpoint
			err  error
		)
		page, more, err = h.reg.ListEndpoints(r.Context(), driver.EndpointQuery{Owner: owner, After: after, Limit: limit - len(all)})
		if err != nil {
			h.errs.Write(w, r, err)
			return
		}
		for _, ep := range page {
			if ep.Owner != owner {
				// A registry's mistake must not show another licensee's endpoint.
				h.errs.Write(w, r, fmt.Errorf("producer: the registry listed webhook endpoint %s for %q, but it belongs to %q", ep.ID, owner, ep.Owner))
				return
			}
		}
		all = append(all, page...)
		if len(page) == 0 {
			break
		}
		after = page[len(page)-1].ID
	}
	slices.SortStableFunc(all, func(a, b Endpoint) int { return a.Created.Compare(b.Created) })
	now := h.now()
	out := endpointList[endpointJSON]{Object: "list", Data: make([]endpointJSON, len(all)), HasMore: more && h.max <= 0}
	for i, ep := range all {
		out.Data[i] = wire(ep, now)
	}
	h.writeJSON(w, r, http.StatusOK, out)
}

// get handles GET webhook_endpoints/{id}.
func (h *EndpointsHandler) get(w http.ResponseWriter, r *http.Request) {
	owner, ok := h.owner(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	ep, err := h.reg.Lookup(r.Context(), id)
	switch {
	case errors.Is(err, ErrUnknownEndpoint) || (err == nil && (ep.Owner != owner || !ep.DeletedAt.IsZero())):
		h.errs.Write(w, r, notFound(id))
		return
	case err != nil:
		h.errs.Write(w, r, err)
		return
	}
	h.writeJSON(w, r, http.StatusOK, wire(ep, h.now()))
}

// errNotYours is the change functions' refusal of another licensee's endpoint.
var errNotYours = errors.New("producer: not the licensee's endpoint")

// edit runs change on the licensee's endpoint id, answering 404 for an endpoint that is not theirs
// or is gone, and the problem of any other failure. ok reports success.
func (h *EndpointsHandler) edit(w http.ResponseWriter, r *http.Request, owner string, change func(*Endpoint) error) (Endpoint, bool) {
	id := r.PathValue("id")
	ep, err := h.reg.UpdateEndpoint(r.Context(), id, func(ep *Endpoint) error {
		if ep.Owner != owner {
			return errNotYours
		}
		return change(ep)
	})
	var ae *apierror.Error
	switch {
	case errors.Is(err, ErrUnknownEndpoint) || errors.Is(err, errNotYours):
		h.refuse(w, r, notFound(id))
		return Endpoint{}, false
	case errors.As(err, &ae):
		h.refuse(w, r, ae)
		return Endpoint{}, false
	case err != nil:
		// The request's settings were checked, so an ErrInvalidEndpoint here is the stored endpoint's
		// fault: an opaque 500, like any other failure of the registry.
		h.errs.Write(w, r, err)
		return Endpoint{}, false
	}
	return ep, true
}

// endpointPatch is the body of PATCH webhook_endpoints/{id}.
type endpointPatch struct {
	settings
	Status *string `json:"status"`
}

// update handles PATCH webhook_endpoints/{id}.
func (h *EndpointsHandler) update(w http.ResponseWriter, r *http.Request) {
	owner, ok := h.owner(w, r)
	if !ok {
		return
	}
	var in endpointPatch
	if err := apierror.Decode(r, &in, nil); err != nil {
		h.refuse(w, r, err)
		return
	}
	now := h.now()
	ep, ok := h.edit(w, r, owner, func(ep *Endpoint) error {
		var c apierror.Collector
		if err := h.check(&c, r, &in.settings, *ep); err != nil {
			return err
		}
		if in.Status != nil {
			c.Check(*in.Status == "enabled" || *in.Status == "disabled",
				apierror.Body("/status", CodeInvalidSetting, `must be "enabled" or "disabled"`))
		}
		if err := c.Err(); err != nil {
			return err
		}
		in.applyTo(ep)
		switch {
		case in.Status == nil:
		case *in.Status == "enabled":
			// Enabled again, the endpoint starts with a clean record: the failing period that
			// disabled it does not disable it again at its next failure.
			ep.DisabledReason, ep.DisabledAt, ep.FailingSince = "", time.Time{}, time.Time{}
		case ep.DisabledReason == "": // disabling an endpoint disabled already keeps why and since when
			ep.DisabledReason, ep.DisabledAt = DisabledManual, now
		}
		return nil
	})
	if ok {
		h.writeJSON(w, r, http.StatusOK, wire(ep, now))
	}
}

// delete handles DELETE webhook_endpoints/{id}.
func (h *EndpointsHandler) delete(w http.ResponseWriter, r *http.Request) {
	owner, ok := h.owner(w, r)
	if !ok {
		return
	}
	now := h.now()
	ep, ok := h.edit(w, r, owner, func(ep *Endpoint) error {
		ep.DeletedAt = now
		return nil
	})
	if ok {
		h.writeJSON(w, r, http.StatusOK, struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Deleted bool   `json:"deleted"`
		}{ep.ID, "webhook_endpoint", true})
	}
}

// maxRollBody caps the roll_secret request, whose body is empty or {"expires_in": n}.
const maxRollBody = 1 << 10

// roll handles POST webhook_endpoints/{id}/roll_secret.
func (h *EndpointsHandler) roll(w http.ResponseWriter, r *http.Request) {
	owner, ok := h.owner(w, r)
	if !ok {
		return
	}
	var in struct {
		ExpiresIn *int64 `json:"expires_in"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRollBody+1))
	switch {
	case err != nil:
		h.refuse(w, r, apierror.Invalid(apierror.Body("", "body_unreadable", "the request body could not be read completely")))
		return
	case len(body) > maxRollBody:
		h.refuse(w, r, apierror.BodyTooLarge(maxRollBody))
		return
	case len(bytes.TrimSpace(body)) > 0:
		if err := apierror.DecodeBytes(body, &in, nil); err != nil {
			h.refuse(w, r, err)
			return
		}
	}
	expiresIn := DefaultRollExpiry
	if in.ExpiresIn != nil {
		n := *in.ExpiresIn
		if n < 0 || n > int64(MaxRollExpiry/time.Second) {
			h.refuse(w, r, apierror.Invalid(apierror.Body("/expires_in", CodeInvalidSetting,
				fmt.Sprintf("must be between 0 (the old secret stops at once) and %d seconds (7 days)", int64(MaxRollExpiry/time.Second)))))
			return
		}
		expiresIn = time.Duration(n) * time.Second
	}
	now := h.now()
	secret := webhook.NewSecret()
	ep, ok := h.edit(w, r, owner, func(ep *Endpoint) error {
		// Only the newest old secret stays: rolling twice drops the oldest.
		ep.Secrets, ep.OldSecretsExpire = []string{secret, ep.Secrets[0]}, now.Add(expiresIn)
		if expiresIn == 0 {
			ep.Secrets, ep.OldSecretsExpire = []string{secret}, time.Time{}
		}
		return nil
	})
	if ok {
		out := wire(ep, now)
		out.Secret = secret
		idempotency.Secret(w)
		h.writeJSON(w, r, http.StatusOK, out)
	}
}

// eventTypeJSON is a catalogue entry on the wire.
type eventTypeJSON struct {
	Object      string `json:"object"` // "event_type"
	Type        string `json:"type"`
	Description string `json:"description"`
	Schema      string `json:"schema,omitempty"`
}

// eventTypes handles GET event_types.
func (h *EndpointsHandler) eventTypes(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.owner(w, r); !ok {
		return
	}
	out := endpointList[eventTypeJSON]{Object: "list", Data: make([]eventTypeJSON, len(h.types))}
	for i, et := range h.types {
		out.Data[i] = eventTypeJSON{Object: "event_type", Type: et.Type, Description: et.Description, Schema: et.Schema}
	}
	h.writeJSON(w, r, http.StatusOK, out)
}
