package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/sandbox"
	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// EventOrderCreated is the type of the event every new order emits.
const EventOrderCreated = "order.created"

// EventCatalogue is the server's event catalogue: what GET /v1/event_types lists and what an
// endpoint's enabled_events may name. The sandbox's trigger may send other types too; only endpoints
// subscribed to every type ("*") receive those.
var EventCatalogue = []producer.EventType{
	{Type: EventOrderCreated, Description: "An order was created (POST /v1/orders); its data is the order.",
		Schema: "#/components/schemas/Order"},
	{Type: producer.EventEndpointDisabled, Description: "Another endpoint of the licensee was disabled: it answered 410 " +
		"Gone, or kept failing; its data names it, the reason and the last error.",
		Schema: "#/components/schemas/WebhookEndpointDisabled"},
	{Type: sandbox.DefaultTestEventType, Description: "A test event, sent by the sandbox's trigger (POST /v1/sandbox/events) " +
		"when it names no type; its data is what the trigger sent."},
}

// CodeNotSubscribed is the problem code of a sandbox trigger naming an endpoint that is not
// subscribed to the event's type (its enabled_events), located at /type.
const CodeNotSubscribed = "endpoint_not_subscribed"

// Problem codes of the bounds on events.
const (
	// CodeEventTooLarge: the event an order or a trigger would publish is larger than the publisher
	// allows (WebhookOptions.MaxEventBytes).
	CodeEventTooLarge = "event_too_large"
	// CodeEventsQuotaExceeded: a webhook endpoint the event would go to keeps as many events as the
	// store allows (DefaultMaxStreamEvents).
	CodeEventsQuotaExceeded = "events_quota_exceeded"
)

// eventRefusal turns the publisher's and the log's refusals of an event into their problems, located
// at pointer in the body (the event's data); for any other error it returns nil.
//
// Why 429 for a full endpoint: like the idempotency records' quota, the room frees with time, as the
// oldest events pass the retention, so the answer says when to try again (Retry-After); an endpoint
// limit, which waiting never frees, is a 422 instead. Why 413 for an event too large: the request
// carries more than the server will publish; the same request will never succeed.
func eventRefusal(err error, pointer string) *apierror.Error {
	switch {
	case errors.Is(err, producer.ErrEventTooLarge):
		var detail string
		if _, after, ok := strings.Cut(err.Error(), "too large: "); ok {
			detail = "the event to publish is too large: " + after
		} else {
			detail = "the event to publish is too large"
		}
		return apierror.New(http.StatusRequestEntityTooLarge, CodeEventTooLarge, detail,
			apierror.Body(pointer, CodeEventTooLarge, "makes the event larger than the server publishes"))
	case errors.Is(err, producer.ErrStreamFull):
		detail := "a webhook endpoint of this licensee keeps as many events as it may, and the event could not be added; " +
			"room frees as its oldest events pass the retention: retry after the number of seconds in Retry-After"
		return apierror.New(http.StatusTooManyRequests, CodeEventsQuotaExceeded, detail,
			apierror.Body(pointer, CodeEventsQuotaExceeded, "no room for another event on a webhook endpoint of this licensee")).
			WithHeader("Retry-After", apierror.RetryAfter(eventsQuotaRetryAfter))
	}
	return nil
}

// maxCredentialsBody caps the credentials request, whose body is empty or {}.
const maxCredentialsBody = 4 << 10

// scopeOf returns the data scope of the authenticated principal. The Authenticator runs before every
// handler that calls it, so a missing principal is a wiring mistake and becomes an opaque 500.
func scopeOf(r *http.Request) (string, error) {
	return apikey.RequestScope(r)
}

// createOrder handles POST /{version}/orders. The idempotency middleware in front of it makes a retried
// request replay this handler's response instead of running it again.
func (s *Server) createOrder(w http.ResponseWriter, r *http.Request) {
	scope, err := scopeOf(r)
	if err != nil {
		s.problems.Write(w, r, err)
		return
	}
	in, err := decodeCreateOrder(r, s.versionOf(r)) // strict: unknown members are refused, located
	if err != nil {
		s.refuse(w, r, err)
		return
	}
	o := newOrder(in, s.now())
	data, err := json.Marshal(o)
	if err != nil {
		s.problems.Write(w, r, err)
		return
	}
	// The order and its events commit together (see Store.CreateOrder): a consumer can never miss the
	// event of an order that exists, nor receive one for an order that does not.
	err = s.store.CreateOrder(r.Context(), scope, o, func(ctx context.Context, log driver.Log, eps []producer.Endpoint) error {
		// The store read these endpoints in this unit of work: no need to look each up again. One
		// append for all those subscribed to the type (one statement on PostgreSQL), each endpoint
		// its own event.
		evs, err := s.publisher.WithLog(log).PublishToEach(ctx, eps, EventOrderCreated, json.RawMessage(data))
		if err != nil {
			return err
		}
		s.stats.eventsEmitted.Add(int64(len(evs)))
		return nil
	})
	if refused := eventRefusal(err, ""); refused != nil {
		// Nothing was stored: the order and its events go together. The key is released.
		s.refuse(w, r, refused)
		return
	}
	if err != nil {
		s.problems.Write(w, r, err)
		return
	}
	s.stats.ordersCreated.Add(1)
	noteAppended(r.Context())
	w.Header().Set("Location", "/"+s.versionOf(r)+"/orders/"+o.ID)
	writeJSON(w, http.StatusCreated, data)
}

// getOrder handles GET /v1/orders/{id}. Another licensee's order, or the same licensee's order seen
// with a key of the other environment, is the same 404 as an order that does not exist.
func (s *Server) getOrder(w http.ResponseWriter, r *http.Request) {
	scope, err := scopeOf(r)
	if err != nil {
		s.problems.Write(w, r, err)
		return
	}
	o, err := s.store.Order(r.Context(), scope, r.PathValue("id"))
	if errors.Is(err, ErrNotFound) {
		s.problems.Write(w, r, orderNotFound())
		return
	}
	if err != nil {
		s.problems.Write(w, r, err)
		return
	}
	data, err := json.Marshal(o)
	if err != nil {
		s.problems.Write(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, data)
}

// orderNotFound is the 404 for an unknown id and for another licensee's id alike: the answer must not
// tell a caller that an id exists elsewhere.
func orderNotFound() *apierror.Error {
	return apierror.NotFound(CodeOrderNotFound, "path id: no order of yours has this id",
		apierror.Path("id", CodeOrderNotFound, "no order of yours has this id"))
}

// endpointInSandbox reports whether ep belongs to a sandbox key's licensee: its Owner is the
// principal's scope, "sandbox:<licensee>" or "live:<licensee>" (apikey.Principal.Scope).
func endpointInSandbox(ep producer.Endpoint) bool {
	return strings.HasPrefix(ep.Owner, string(apikey.Sandbox)+":")
}

// urlPolicy is the URL policy of the request's environment: production keys must use https, sandbox
// keys may use http (WebhookOptions says otherwise when configured); each environment's guard is its
// own (WebhookOptions.SandboxGuard, LiveGuard).
func (s *Server) urlPolicy(r *http.Request) ssrf.URLPolicy {
	if sandbox.InSandbox(r) {
		return s.urlSandbox
	}
	return s.urlLive
}

// SandboxCredentials is the response to POST /v1/sandbox/credentials: what an evaluation starts with.
// The key is shown once; the server keeps only its hash.
type SandboxCredentials struct {
	Object      string `json:"object"` // "sandbox_credentials"
	APIKey      string `json:"api_key"`
	Environment string `json:"environment"`
	ExpiresAt   int64  `json:"expires_at"` // Unix seconds
	KeyID       string `json:"key_id"`
	Licensee    string `json:"licensee"`
	BaseURL     string `json:"base_url"`
}

// issueCredentials handles POST /v1/sandbox/credentials, behind the admin token: each call starts a
// new evaluation with a licensee of its own, so evaluations never see each other's data.
func (s *Server) issueCredentials(w http.ResponseWriter, r *http.Request) {
	// The request has no members; a body, when sent, must be an empty JSON object, so that a client
	// that believes it is setting something learns it is not.
	body, err := io.ReadAll(io.LimitReader(r.Body, maxCredentialsBody+1))
	if err != nil {
		s.refuse(w, r, apierror.Invalid(apierror.Body("", "body_unreadable", "the request body could not be read completely")))
		return
	}
	if len(body) > maxCredentialsBody {
		s.refuse(w, r, apierror.BodyTooLarge(maxCredentialsBody))
		return
	}
	if len(bytes.TrimSpace(body)) > 0 {
		var in struct{}
		if err := apierror.DecodeBytes(body, &in, nil); err != nil {
			s.refuse(w, r, err)
			return
		}
	}
	c, err := s.IssueCredentials(r.Context(), apikey.Sandbox)
	if err != nil {
		s.problems.Write(w, r, err)
		return
	}
	data, err := json.Marshal(SandboxCredentials{Object: "sandbox_credentials", APIKey: c.APIKey,
		Environment: string(c.Environment), ExpiresAt: c.ExpiresAt.Unix(), KeyID: c.KeyID,
		Licensee: c.Licensee, BaseURL: c.BaseURL})
	if err != nil {
		s.problems.Write(w, r, err)
		return
	}
	// The key is shown once: never stored in plain text for replay, never cached (Cache-Control:
	// no-store).
	idempotency.Secret(w)
	writeJSON(w, http.StatusCreated, data)
}

// refuse answers a request refused before anything was done (its input failed to decode or validate):
// the idempotency record is released rather than stored (idempotency.NotPerformed), so junk bodies
// do not fill the store and a corrected retry may reuse its key.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err error) {
	idempotency.NotPerformed(w)
	s.problems.Write(w, r, err)
}

// writeJSON writes a successful JSON response.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
