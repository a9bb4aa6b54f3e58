package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/sandbox"
	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// EventOrderCreated is the type of the event every new order emits.
const EventOrderCreated = "order.created"

// CodeEndpointLimitReached is the problem code of a registration past the licensee's endpoint limit
// (WebhookOptions.MaxEndpoints). A refused URL's code is the ssrf.URLError's (url_too_long,
// scheme_not_allowed, host_blocked, …), located at body /url.
const CodeEndpointLimitReached = "webhook_endpoint_limit_reached"

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
	err = s.store.CreateOrder(r.Context(), scope, o, func(ctx context.Context, log driver.Log, ids []string) error {
		// The store read these endpoints in this unit of work: no need to look each up again. One
		// append for all of them (one statement on PostgreSQL), each endpoint its own event.
		eps := make([]producer.Endpoint, len(ids))
		for i, id := range ids {
			eps[i] = producer.Endpoint{ID: id}
		}
		if _, err := s.publisher.WithLog(log).PublishToEach(ctx, eps, EventOrderCreated, json.RawMessage(data)); err != nil {
			return err
		}
		s.stats.eventsEmitted.Add(int64(len(ids)))
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

// WebhookEndpoint is the response to POST /v1/webhook_endpoints. The secret is shown here, once: the
// consumer verifies every delivery and every range response with it.
type WebhookEndpoint struct {
	ID         string `json:"id"`
	Object     string `json:"object"` // "webhook_endpoint"
	URL        string `json:"url"`
	Secret     string `json:"secret"`
	APIVersion string `json:"api_version"`
}

type createEndpointRequest struct {
	URL *string `json:"url"`
}

// validate checks the request; policy is the URL policy of the caller's environment. The URL check is
// registration's early, located refusal of what the delivery transport's guard would refuse at every
// attempt anyway: a URL that names a blocked address, a local-use name, an obfuscated IPv4 form, user
// information, a fragment, or plain http where https is required.
func (in createEndpointRequest) validate(policy ssrf.URLPolicy) error {
	var c apierror.Collector
	if c.Require("/url", in.URL != nil) {
		var ue *ssrf.URLError
		if err := policy.Check(*in.URL); errors.As(err, &ue) {
			c.Add(apierror.Body("/url", ue.Code, ue.Detail))
		} else if err != nil {
			return err // URLPolicy returns only *URLError: anything else is a bug, an opaque 500
		}
	}
	return c.Err()
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

// endpointLimitReached is the refusal of a registration past the limit.
//
// Why 422: the request is well-formed and its URL acceptable — the same body would succeed for
// another licensee — so it is not a 400 (Stripe's answer, which our errors keep for invalid input).
// Not 429: that is a rate, with a Retry-After, and waiting never frees an endpoint slot. Not 409:
// idempotency.Transport, like other clients of this API, retries every 409 with the same key (it is
// the answer to a key still in use), so a quota refusal as 409 would be retried in vain. 422 says the
// request cannot be carried out as it stands, which is the case until the licensee has fewer
// endpoints; GitHub answers its hook limit the same way. The limit is in the detail, and the problem
// is located at the body as a whole: no one field is at fault.
func endpointLimitReached(limit int) *apierror.Error {
	detail := fmt.Sprintf("this licensee already has %d webhook endpoints in this environment, the most allowed", limit)
	return apierror.Unprocessable(CodeEndpointLimitReached, detail, apierror.Body("", CodeEndpointLimitReached, detail))
}

// createEndpoint handles POST /v1/webhook_endpoints: the endpoint gets its own stream of events,
// numbered from 1, and its own signing secret.
func (s *Server) createEndpoint(w http.ResponseWriter, r *http.Request) {
	scope, err := scopeOf(r)
	if err != nil {
		s.problems.Write(w, r, err)
		return
	}
	var in createEndpointRequest
	if err := apierror.Decode(r, &in, nil); err != nil {
		s.refuse(w, r, err)
		return
	}
	if err := in.validate(s.urlPolicy(r)); err != nil {
		s.refuse(w, r, err)
		return
	}
	ep := producer.Endpoint{ID: endpointIDs.New(), URL: *in.URL, Secrets: []string{webhook.NewSecret()},
		Owner: scope, APIVersion: s.pinnedVersion(r)}
	err = s.store.CreateEndpoint(r.Context(), ep, s.maxEPs)
	if errors.Is(err, ErrEndpointLimit) {
		// Nothing was created: the key is released, so the same request may succeed later.
		s.refuse(w, r, endpointLimitReached(s.maxEPs))
		return
	}
	if err != nil {
		s.problems.Write(w, r, err)
		return
	}
	data, err := json.Marshal(WebhookEndpoint{ID: ep.ID, Object: "webhook_endpoint", URL: ep.URL,
		Secret: ep.Secrets[0], APIVersion: ep.APIVersion})
	if err != nil {
		s.problems.Write(w, r, err)
		return
	}
	// The signing secret is shown once: never stored in plain text for replay, never cached.
	idempotency.Secret(w)
	writeJSON(w, http.StatusCreated, data)
}

// WebhookEndpointList is the response to GET /v1/webhook_endpoints: every endpoint of the caller's
// licensee and environment, oldest first, in one page. HasMore is always false: a licensee has at
// most WebhookOptions.MaxEndpoints endpoints per environment (16 by default), few enough for one page,
// and the member is there so that this list reads like every other list of the API.
type WebhookEndpointList struct {
	Object  string                  `json:"object"` // "list"
	Data    []ListedWebhookEndpoint `json:"data"`   // [] when there is none, never null
	HasMore bool                    `json:"has_more"`
}

// ListedWebhookEndpoint is an endpoint as GET /v1/webhook_endpoints lists it: a WebhookEndpoint
// without its signing secret, which is shown once, in the answer to the endpoint's registration. It
// is a type of its own rather than a WebhookEndpoint with the secret left out, so that no change to
// the list handler can send a secret by mistake.
type ListedWebhookEndpoint struct {
	ID         string `json:"id"`
	Object     string `json:"object"` // "webhook_endpoint"
	URL        string `json:"url"`
	APIVersion string `json:"api_version"`
}

// listEndpoints handles GET /v1/webhook_endpoints: the webhook endpoints of the caller's scope — its
// licensee in its environment, as on every route, so another licensee's endpoints and the other
// environment's never appear — in the order they were registered, oldest first. The signing secrets
// are not listed: each is shown once, when its endpoint is created (POST /v1/webhook_endpoints), and
// never again. Without an endpoint limit (WebhookOptions.MaxEndpoints < 0) the one page holds them
// all.
func (s *Server) listEndpoints(w http.ResponseWriter, r *http.Request) {
	scope, err := scopeOf(r)
	if err != nil {
		s.problems.Write(w, r, err)
		return
	}
	ids, err := s.store.EndpointIDs(r.Context(), scope)
	if err != nil {
		s.problems.Write(w, r, err)
		return
	}
	list := WebhookEndpointList{Object: "list", Data: make([]ListedWebhookEndpoint, 0, len(ids))}
	for _, id := range ids {
		ep, err := s.store.Lookup(r.Context(), id)
		if err == nil && ep.Owner != scope {
			// The store listed the ID for this scope; asking again costs nothing and keeps a store's
			// mistake from showing another licensee's URL. Endpoints are never deleted, so an ID
			// listed and then not found is a store's mistake too.
			err = fmt.Errorf("server: the store listed webhook endpoint %s for %q, but it belongs to %q", id, scope, ep.Owner)
		}
		if err != nil {
			s.problems.Write(w, r, err)
			return
		}
		list.Data = append(list.Data, ListedWebhookEndpoint{ID: ep.ID, Object: "webhook_endpoint", URL: ep.URL,
			APIVersion: ep.APIVersion})
	}
	data, err := json.Marshal(list)
	if err != nil {
		s.problems.Write(w, r, err)
		return
	}
	// Never cached: the list is the integration as it stands (a cached copy would hide the endpoint
	// just registered), and a URL may carry the consumer's own token.
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, data)
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
