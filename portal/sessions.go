package portal

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/versioning"
)

// maxSessionsBody bounds the body of POST /v1/portal_sessions, which is empty or {}.
const maxSessionsBody = 1024

// sessionJSON is the answer of POST /v1/portal_sessions.
type sessionJSON struct {
	Object      string `json:"object"` // "portal_session"
	URL         string `json:"url"`
	ExpiresAt   int64  `json:"expires_at"`
	Environment string `json:"environment"`
}

// SessionsHandler returns the API route a platform's customer (or the platform, on its behalf) gets a
// portal link from, behind the apikey.Authenticator and, when there is one, the versioning router:
//
//	POST /v1/portal_sessions
//
//	HTTP/1.1 201 Created
//	{"object":"portal_session","url":"https://api.example.com/portal/login?token=…","expires_at":1767225900,"environment":"sandbox"}
//
// The link is for the request's principal — its licensee and environment, with its key's permissions
// — and for the version the request is served at (NewLink). The body is empty or {}. The answer is
// marked idempotency.Secret: the link is a credential, which no idempotency store keeps in the clear.
// A request nobody authenticated is the opaque 500 of a wiring mistake (apikey.ErrNoPrincipal); a
// Store that fails is the opaque 500 too, logged.
func (p *Portal) SessionsHandler(problems apierror.Writer) http.Handler {
	if problems.Logger == nil {
		problems.Logger = p.log
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pr, ok := apikey.FromContext(r.Context())
		if !ok {
			problems.Write(w, r, apikey.ErrNoPrincipal)
			return
		}
		if err := emptyOrObject(r); err != nil {
			idempotency.NotPerformed(w)
			problems.Write(w, r, err)
			return
		}
		s := Session{Licensee: pr.Licensee, Environment: pr.Environment, KeyID: pr.KeyID, Permissions: pr.Permissions}
		if d, ok := versioning.FromContext(r.Context()); ok {
			s.Version = d.Version.Name
		}
		link, err := p.NewLink(r.Context(), s)
		if err != nil {
			problems.Write(w, r, err)
			return
		}
		idempotency.Secret(w)
		b, err := json.Marshal(sessionJSON{Object: "portal_session", URL: link.URL, ExpiresAt: link.ExpiresAt.Unix(),
			Environment: string(pr.Environment)})
		if err != nil {
			problems.Write(w, r, err)
			return
		}
		// Written here rather than by apierror's WriteJSON, whose X-Content-Type-Options the
		// idempotency middleware does not keep for a replay without its body: the answer and its
		// replay carry the same headers, as for every answer that carries a secret.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(b)
	})
}

// emptyOrObject checks that r's body is empty or an empty JSON object. It reads the body rather than
// trusting its Content-Length, which a chunked request gives as -1, empty or not.
func emptyOrObject(r *http.Request) error {
	if r.Body == nil {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxSessionsBody+1))
	switch {
	case err != nil:
		return apierror.Invalid(apierror.Body("", "body_unreadable", "the request body could not be read completely"))
	case len(body) > maxSessionsBody:
		return apierror.BodyTooLarge(maxSessionsBody)
	case len(bytes.TrimSpace(body)) == 0:
		return nil
	}
	if err := apierror.RequireJSON(r); err != nil {
		return err
	}
	var none struct{}
	return apierror.DecodeBytes(body, &none, nil)
}
