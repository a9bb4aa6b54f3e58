package apikey

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
)

// Defaults and bounds of KeysHandlerOptions and of a roll.
const (
	// DefaultMaxKeys is how many keys one licensee may hold in one environment at once.
	DefaultMaxKeys = 100
	// DefaultRollOverlap is how long a rolled key keeps working when the request does not say.
	DefaultRollOverlap = 24 * time.Hour
	// MaxRollOverlap is the longest a rolled key may keep working.
	MaxRollOverlap = 7 * 24 * time.Hour
)

// Codes of the problems the KeysHandler writes, besides CodePermissionDenied.
const (
	CodeKeyNotFound       = "api_key_not_found"     // 404: no key of the caller's licensee and environment has the ID
	CodeKeyLimitReached   = "api_key_limit_reached" // 422: the licensee holds KeysHandlerOptions.MaxKeys keys
	CodeKeyEnding         = "api_key_ending"        // 422: the key to roll has ended or is already set to end (expired, rolled or revoked)
	CodeInvalidPermission = "invalid_permission"    // 400: a permission that is not one of the API's, or a list of none or too many
	CodeOutOfRange        = "out_of_range"          // 400: expires_in outside 0 to MaxRollOverlap seconds
)

// KeysHandlerOptions tune a KeysHandler. A nil *KeysHandlerOptions and the zero value mean the
// defaults.
type KeysHandlerOptions struct {
	// Problems writes the problem responses.
	Problems apierror.Writer
	// MaxKeys bounds the keys one licensee holds in one environment at once (rolled keys still
	// working count); 0 means DefaultMaxKeys. A roll is never refused for it: a leaked key must
	// always be replaceable.
	MaxKeys int
}

// KeysHandler is the licensee's own API for its keys, to mount behind the Authenticator with
// Register: list, create (restricted or not), get, revoke and roll. A request only ever sees keys of
// its own licensee and environment: another's is the same 404 as an unknown ID. A key is never shown
// again after the answer that created it. A restricted key may hand out only what it has: it creates,
// rolls and revokes keys whose permissions it holds, never the full key. The routes' own permissions
// (api_keys:read for GET, api_keys:write for the rest) are the service's to require, with
// Authenticator.Require, like any other route's.
//
// A KeysHandler is safe for concurrent use. Build one with NewKeysHandler; the zero value is not
// usable: every route it registers answers the opaque 500 (ErrNotBuilt).
type KeysHandler struct {
	issuer  *Issuer
	errs    apierror.Writer
	maxKeys int
}

// NewKeysHandler returns the keys API of issuer's keys. A nil issuer is an error.
func NewKeysHandler(issuer *Issuer, opts *KeysHandlerOptions) (*KeysHandler, error) {
	if issuer == nil || issuer.store == nil {
		return nil, errors.New("apikey: NewKeysHandler needs an Issuer built by NewIssuer")
	}
	h := &KeysHandler{issuer: issuer, maxKeys: DefaultMaxKeys}
	if opts != nil {
		if opts.MaxKeys < 0 {
			return nil, fmt.Errorf("apikey: NewKeysHandler: negative KeysHandlerOptions.MaxKeys %d", opts.MaxKeys)
		}
		h.errs = opts.Problems
		if opts.MaxKeys > 0 {
			h.maxKeys = opts.MaxKeys
		}
	}
	return h, nil
}

// Register mounts the keys API on mux, under "/<version>" when version is not empty:
//
//	GET    /api_keys            the licensee's keys in the request's environment that still work
//	POST   /api_keys            {"permissions": […]} → 201 a new key, its secret shown this once
//	GET    /api_keys/{id}       one key
//	DELETE /api_keys/{id}       revoke the key now → 200 the key
//	POST   /api_keys/{id}/roll  {"expires_in": seconds} → 201 a new key with the same permissions;
//	                            the old one works for expires_in more seconds (default 86400, 0 ends
//	                            it at once, at most 604800)
//
// mutating wraps the routes that change something — the idempotency middleware, typically; nil
// wraps nothing.
func (h *KeysHandler) Register(mux *http.ServeMux, version string, mutating func(http.Handler) http.Handler) {
	if mutating == nil {
		mutating = func(next http.Handler) http.Handler { return next }
	}
	p := func(method, path string) string {
		if version == "" {
			return method + " " + path
		}
		return method + " /" + version + path
	}
	mux.HandleFunc(p(http.MethodGet, "/api_keys"), h.list)
	mux.Handle(p(http.MethodPost, "/api_keys"), mutating(http.HandlerFunc(h.create)))
	mux.HandleFunc(p(http.MethodGet, "/api_keys/{id}"), h.get)
	mux.Handle(p(http.MethodDelete, "/api_keys/{id}"), mutating(http.HandlerFunc(h.revoke)))
	mux.Handle(p(http.MethodPost, "/api_keys/{id}/roll"), mutating(http.HandlerFunc(h.roll)))
}

// keyJSON is a key on the wire; never its secret, except in the answer that created it.
type keyJSON struct {
	Object      string      `json:"object"` // "api_key"
	ID          string      `json:"id"`
	Environment Environment `json:"environment"`
	Restricted  bool        `json:"restricted"`
	Permissions []string    `json:"permissions"` // null for the full key
	Created     int64       `json:"created"`
	ExpiresAt   *int64      `json:"expires_at"`   // when it stops working; null: never
	LastUsedAt  *int64      `json:"last_used_at"` // to the minute; null: never used
	Secret      string      `json:"secret,omitempty"`
	// Previous is, in a roll's answer, the rolled key with the end the roll set.
	Previous *keyJSON `json:"previous_key,omitempty"`
}

func keyWire(c Credential) *keyJSON {
	unix := func(t time.Time) *int64 {
		if t.IsZero() {
			return nil
		}
		u := t.Unix()
		return &u
	}
	return &keyJSON{Object: "api_key", ID: c.ID, Environment: c.Environment, Restricted: c.Permissions != nil,
		Permissions: c.Permissions, Created: c.CreatedAt.Unix(), ExpiresAt: unix(c.EndsAt()), LastUsedAt: unix(c.LastUsedAt)}
}

// caller is the request's principal; without one the request was not authenticated, a wiring
// mistake answered with the opaque 500.
func (h *KeysHandler) caller(w http.ResponseWriter, r *http.Request) (Principal, bool) {
	if h.issuer == nil {
		h.errs.Write(w, r, errZeroKeysHandler)
		return Principal{}, false
	}
	p, ok := FromContext(r.Context())
	if !ok {
		h.errs.Write(w, r, ErrNoPrincipal)
	}
	return p, ok
}

// own returns the caller's key with the path's ID, or answers the 404 that an unknown ID gets too.
func (h *KeysHandler) own(w http.ResponseWriter, r *http.Request, p Principal) (Credential, bool) {
	id := r.PathValue("id")
	c, err := h.issuer.store.Lookup(r.Context(), id)
	if err == nil && (c.Licensee != p.Licensee || c.Environment != p.Environment) {
		err = ErrCredentialNotFound
	}
	switch {
	case errors.Is(err, ErrCredentialNotFound):
		const detail = "no API key of this licensee and environment has this ID"
		h.errs.Write(w, r, apierror.NotFound(CodeKeyNotFound, detail, apierror.Path("id", CodeKeyNotFound, detail)))
		return Credential{}, false
	case err != nil:
		h.errs.Write(w, r, err)
		return Credential{}, false
	}
	return c, true
}

// mayHandOut refuses, with a 403 located at the path's ID, a caller whose key does not hold every
// permission of the key c (the full key: every permission), so that a restricted key can neither
// roll a broader key into one it holds nor revoke one.
func (h *KeysHandler) mayHandOut(w http.ResponseWriter, r *http.Request, p Principal, c Credential, what string) bool {
	if covers(p.Permissions, c.Permissions) {
		return true
	}
	detail := "this API key cannot " + what + " a key with permissions it lacks"
	h.refuse(w, r, apierror.Forbidden(CodePermissionDenied, detail, apierror.Path("id", CodePermissionDenied, detail)))
	return false
}

// refuse answers a request that changed nothing: the idempotency key is released, so the same
// request may succeed later (once the key has the permission, or a slot is free).
func (h *KeysHandler) refuse(w http.ResponseWriter, r *http.Request, err error) {
	idempotency.NotPerformed(w)
	h.errs.Write(w, r, err)
}

func (h *KeysHandler) list(w http.ResponseWriter, r *http.Request) {
	p, ok := h.caller(w, r)
	if !ok {
		return
	}
	keys, err := h.issuer.store.List(r.Context(), p.Licensee, p.Environment, h.issuer.now())
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	out := struct {
		Object  string     `json:"object"`
		Data    []*keyJSON `json:"data"`
		HasMore bool       `json:"has_more"`
	}{Object: "list", Data: make([]*keyJSON, 0, len(keys))}
	for _, c := range keys {
		if c.Licensee == p.Licensee && c.Environment == p.Environment { // a store's mistake shows nothing
			out.Data = append(out.Data, keyWire(c))
		}
	}
	h.writeJSON(w, r, http.StatusOK, out)
}

func (h *KeysHandler) get(w http.ResponseWriter, r *http.Request) {
	p, ok := h.caller(w, r)
	if !ok {
		return
	}
	if c, ok := h.own(w, r, p); ok {
		h.writeJSON(w, r, http.StatusOK, keyWire(c))
	}
}

func (h *KeysHandler) create(w http.ResponseWriter, r *http.Request) {
	p, ok := h.caller(w, r)
	if !ok {
		return
	}
	var in struct {
		Permissions *[]string `json:"permissions"`
	}
	if err := apierror.Decode(r, &in, &apierror.DecodeOptions{MaxBytes: 16 << 10}); err != nil {
		h.errs.Write(w, r, err)
		return
	}
	// Omitted: a key like the caller's own.
	perms := p.Permissions
	if in.Permissions != nil {
		perms = *in.Permissions
		if err := h.checkPermissions(perms); err != nil {
			h.errs.Write(w, r, err)
			return
		}
		// A restricted key hands out only what it has.
		for i, perm := range perms {
			if !grants(p.Permissions, perm) {
				detail := "this API key lacks " + perm + ", so it cannot create a key that has it"
				h.refuse(w, r, apierror.Forbidden(CodePermissionDenied, detail,
					apierror.Body(apierror.Pointer("permissions", strconv.Itoa(i)), CodePermissionDenied, detail)))
				return
			}
		}
	}
	active, err := h.issuer.store.List(r.Context(), p.Licensee, p.Environment, h.issuer.now())
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	if len(active) >= h.maxKeys {
		// 422, as a webhook endpoint past its limit: waiting frees nothing, and a 409 would be
		// retried by idempotent clients.
		detail := fmt.Sprintf("this licensee already holds %d API keys in this environment, the most allowed; revoke one to create another", h.maxKeys)
		h.refuse(w, r, apierror.Unprocessable(CodeKeyLimitReached, detail, apierror.Body("", CodeKeyLimitReached, detail)))
		return
	}
	c, key, err := h.issuer.issue(r.Context(), Evaluation{Licensee: p.Licensee, Environment: p.Environment, Permissions: perms})
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	out := keyWire(c)
	out.Secret = key.Reveal()
	idempotency.Secret(w) // shown once: never stored in plain text for a replay
	w.Header().Set("Location", strings.TrimSuffix(r.URL.Path, "/")+"/"+c.ID)
	h.writeJSON(w, r, http.StatusCreated, out)
}

// checkPermissions locates what is wrong with a requested permission list in the body.
func (h *KeysHandler) checkPermissions(perms []string) error {
	if len(perms) == 0 || len(perms) > MaxPermissions {
		return apierror.Invalid(apierror.Body("/permissions", CodeInvalidPermission,
			fmt.Sprintf("must list 1 to %d permissions; omit it for a key with the permissions of this one", MaxPermissions)))
	}
	var violations []apierror.Violation
	for i, perm := range perms {
		if _, err := h.issuer.permissions([]string{perm}); err != nil {
			violations = append(violations, apierror.Body(apierror.Pointer("permissions", strconv.Itoa(i)), CodeInvalidPermission,
				"must be one of this API's permissions, <resource>:read or <resource>:write"))
		}
	}
	if violations != nil {
		return apierror.Invalid(violations...)
	}
	return nil
}

func (h *KeysHandler) revoke(w http.ResponseWriter, r *http.Request) {
	p, ok := h.caller(w, r)
	if !ok {
		return
	}
	c, ok := h.own(w, r, p)
	if !ok || !h.mayHandOut(w, r, p, c, "revoke") {
		return
	}
	if err := h.issuer.Revoke(r.Context(), c.ID); err != nil {
		h.errs.Write(w, r, err)
		return
	}
	if c, ok = h.own(w, r, p); ok {
		h.writeJSON(w, r, http.StatusOK, keyWire(c))
	}
}

func (h *KeysHandler) roll(w http.ResponseWriter, r *http.Request) {
	p, ok := h.caller(w, r)
	if !ok {
		return
	}
	var in struct {
		ExpiresIn *int64 `json:"expires_in"`
	}
	// An empty body asks for the default.
	if r.ContentLength != 0 || r.Header.Get("Content-Type") != "" {
		if err := apierror.Decode(r, &in, &apierror.DecodeOptions{MaxBytes: 4 << 10}); err != nil {
			h.errs.Write(w, r, err)
			return
		}
	}
	overlap := DefaultRollOverlap
	if in.ExpiresIn != nil {
		if *in.ExpiresIn < 0 || *in.ExpiresIn > int64(MaxRollOverlap/time.Second) {
			h.errs.Write(w, r, apierror.Invalid(apierror.Body("/expires_in", CodeOutOfRange,
				fmt.Sprintf("must be 0 to %d seconds: how long the rolled key keeps working", int64(MaxRollOverlap/time.Second)))))
			return
		}
		overlap = time.Duration(*in.ExpiresIn) * time.Second
	}
	c, ok := h.own(w, r, p)
	if !ok || !h.mayHandOut(w, r, p, c, "roll") {
		return
	}
	// Rolled or revoked already: rolling it again would mint keys without bound (revoking it, DELETE,
	// ends it sooner). Expired: there is nothing left to replace without downtime.
	ending := func() {
		const detail = "this API key has ended or is already set to end (it expired, or was rolled or revoked); roll the key that replaced it, or create another"
		h.refuse(w, r, apierror.Unprocessable(CodeKeyEnding, detail, apierror.Path("id", CodeKeyEnding, detail)))
	}
	if !c.RevokedAt.IsZero() || !c.activeAt(h.issuer.now()) {
		ending()
		return
	}
	next, key, old, err := h.issuer.roll(r.Context(), c, overlap)
	if errors.Is(err, ErrCredentialEnded) { // it ended since it was read
		ending()
		return
	}
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	out := keyWire(next)
	out.Secret = key.Reveal()
	out.Previous = keyWire(old)
	idempotency.Secret(w)
	w.Header().Set("Location", strings.TrimSuffix(strings.TrimSuffix(r.URL.Path, "/roll"), "/"+c.ID)+"/"+next.ID)
	h.writeJSON(w, r, http.StatusCreated, out)
}

func (h *KeysHandler) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	// Never cached: the answers describe credentials, and some carry one.
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}
