package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/sandbox"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
)

// EventOrderCreated is the type of the event every new order emits.
const EventOrderCreated = "order.created"

// Problem codes of webhook endpoint registration.
const (
	CodeInvalidURL = "invalid_url"
)

// maxCredentialsBody caps the credentials request, whose body is empty or {}.
const maxCredentialsBody = 4 << 10

// maxURLLen bounds a webhook URL: long enough for any real one, short enough to store and log.
const maxURLLen = 2048

// scopeOf returns the data scope of the authenticated principal. The Authenticator runs before every
// handler that calls it, so a missing principal is a wiring mistake and becomes an opaque 500.
func scopeOf(r *http.Request) (string, error) {
	return sandbox.ScopeFromContext(r.Context())
}

// createOrder handles POST /v1/orders. The idempotency middleware in front of it makes a retried
// request replay this handler's response instead of running it again.
func (s *Server) createOrder(w http.ResponseWriter, r *http.Request) {
	scope, err := scopeOf(r)
	if err != nil {
		s.problems.Write(w, r, err)
		return
	}
	var in createOrderRequest
	if err := apierror.Decode(r, &in, nil); err != nil { // strict: unknown members are refused, located
		s.refuse(w, r, err)
		return
	}
	if err := in.validate(); err != nil {
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
	err = s.store.CreateOrder(r.Context(), scope, o, func(ctx context.Context, log producer.Log, ids []string) error {
		pub := s.publisher.WithLog(log)
		for _, id := range ids {
			if _, err := pub.Publish(ctx, id, EventOrderCreated, json.RawMessage(data)); err != nil {
				return err
			}
		}
		s.stats.eventsEmitted.Add(int64(len(ids)))
		return nil
	})
	if err != nil {
		s.problems.Write(w, r, err)
		return
	}
	s.stats.ordersCreated.Add(1)
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

func (in createEndpointRequest) validate() error {
	var c apierror.Collector
	if c.Require("/url", in.URL != nil) {
		u, err := url.Parse(*in.URL)
		c.Check(err == nil && len(*in.URL) <= maxURLLen && (u.Scheme == "http" || u.Scheme == "https") &&
			u.Host != "" && u.User == nil && u.Fragment == "",
			apierror.Body("/url", CodeInvalidURL, "must be an absolute http or https URL of at most 2048 bytes, without credentials or fragment"))
	}
	return c.Err()
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
	if err := in.validate(); err != nil {
		s.refuse(w, r, err)
		return
	}
	ep := producer.Endpoint{ID: newID("we_"), URL: *in.URL, Secrets: []string{webhook.NewSecret()},
		Owner: scope, APIVersion: s.pinnedVersion(r)}
	if err := s.store.CreateEndpoint(r.Context(), ep); err != nil {
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
	c, err := s.IssueCredentials(r.Context(), sandbox.Sandbox)
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
