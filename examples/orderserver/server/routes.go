package server

import (
	"context"
	"crypto/subtle"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/sandbox"
	"github.com/svcplatform/conventions/versioning"
)

// Problem codes of the router.
const (
	CodeMethodNotAllowed = apierror.CodeMethodNotAllowed
	CodeRouteNotFound    = apierror.CodeRouteNotFound
)

// permissions is the API's vocabulary of permissions: what a restricted API key may be granted, a
// resource and read or write (write includes read). The full key, which every licensee starts with,
// has them all. Each route below names the one it needs, next to its registration; New refuses a
// route whose permission is not among these and a permission that no route needs, so the two lists
// cannot drift apart. The Issuer accepts only these for a restricted key.
var permissions = []string{
	"orders:read", "orders:write",
	"webhook_endpoints:read", "webhook_endpoints:write",
	"events:read", "events:write",
	"api_keys:read", "api_keys:write",
	"requests:read",
	"version_pin:read", "version_pin:write",
	"sandbox:write",
}

// routes wires every endpoint to its chain of middleware. Reading it top to bottom is the quickest way
// to see what protects what:
//
//   - every response gets an X-Request-Id of the server's own, which every problem repeats
//     (apierror.WithRequestID);
//   - every request, refused ones included, is recorded in the request log under that ID, with the
//     route that served it (requestLogged);
//   - what net/http's muxes would answer in plain text or HTML — a CONNECT, a path that is not in
//     canonical form (which ServeMux redirects), a query string that does not parse — is a problem
//     here (strict);
//   - API routes authenticate the Bearer key and rate-limit production keys (sandbox); their refusals
//     echo X-SVC-Version like every other answer on a known version (echoVersion);
//   - the versioning router takes the version from the path, pins each licensee to one, refuses
//     unknown and sunset versions, and strips the version so one mux serves them all;
//   - a restricted key reaches only the routes whose permission it has (permit, with the permission
//     each route declares where it is registered);
//   - every mutating route requires an Idempotency-Key, scoped by credential (idempotency);
//   - sandbox controls answer a production key exactly like an unknown route, and issuing
//     credentials answers anyone without the admin token exactly like an unknown route.
//
// It also builds s.api and s.rules, which the OpenAPI documents are generated from.
func (s *Server) routes() (http.Handler, error) {
	api := http.NewServeMux()
	s.api, s.rules = api, make(map[string]routeRule)
	s.route(api, "orders:write", "POST /orders", s.idempotent(http.HandlerFunc(s.createOrder)))
	s.route(api, "orders:read", "GET /orders/{id}", http.HandlerFunc(s.getOrder))
	// The endpoint lifecycle — register, list, get, update, delete, roll the secret — and the event
	// catalogue, each write behind the idempotency middleware.
	s.endpointsAPI.Register(api, "", s.mutating)
	s.declare("webhook_endpoints:write", "POST /webhook_endpoints", "PATCH /webhook_endpoints/{id}",
		"DELETE /webhook_endpoints/{id}", "POST /webhook_endpoints/{id}/roll_secret")
	s.declare("webhook_endpoints:read", "GET /webhook_endpoints", "GET /webhook_endpoints/{id}", "GET /event_types")
	s.route(api, "events:read", "GET /webhook_endpoints/{id}/events", s.ranges)
	// The delivery history, statistics, resend and recover: the same authentication and the same 404
	// for another licensee's endpoint as range retrieval (both ask rangeOwner whose endpoints the
	// request may read); resend and recover behind the idempotency middleware.
	s.deliveries.Register(api, "", s.idempotent)
	s.declare("events:read", "GET /webhook_endpoints/{id}/deliveries")
	s.declare("webhook_endpoints:read", "GET /webhook_endpoints/{id}/stats")
	s.declare("events:write", "POST /webhook_endpoints/{id}/events/{sequence}/resend", "POST /webhook_endpoints/{id}/recover")
	// The licensee's own keys: list, create (restricted or not), get, revoke, roll. A restricted key
	// with api_keys:write hands out only permissions it has (apikey.KeysHandler).
	s.keys.Register(api, "", s.mutating)
	s.declare("api_keys:read", "GET /api_keys", "GET /api_keys/{id}")
	s.declare("api_keys:write", "POST /api_keys", "DELETE /api_keys/{id}", "POST /api_keys/{id}/roll")
	// The request log: what became of each request of the licensee in this environment, by the
	// request ID every response and every problem carries (requestlog.RequestsHandler).
	s.requests.Register(api, "")
	s.declare("requests:read", "GET /requests", "GET /requests/{request_id}")
	// The licensee's version pin: read it, upgrade it, or — within the rollback window after an
	// upgrade — go back once (versioning.Router.PinHandler); the POST behind the idempotency
	// middleware like every other.
	pin := s.versions.PinHandler()
	s.route(api, "version_pin:read", "GET /version_pin", pin)
	s.route(api, "version_pin:write", "POST /version_pin", s.idempotent(pin))
	// A one-time link to the webhook portal for the key's licensee and environment, with the key's
	// permissions (package portal). Reading endpoints is the least the portal shows, so that is what
	// minting a link needs; each page then does only what the key could.
	s.route(api, "webhook_endpoints:read", "POST /portal_sessions", s.idempotent(s.portal.SessionsHandler(s.problems)))
	// The changelog, read from the versions' Change definitions: public knowledge about the API,
	// so any key may read it, restricted or not.
	s.anyKey(api, "GET /changelog", s.versions.ChangelogHandler())
	// The sandbox controls, each route of them named so that each can require its permission. The
	// contract sets faults with POST; the sandbox package's controls take PUT for the same request,
	// so POST is handed to them as the PUT it means.
	s.sandboxRoute(api, "sandbox:write", "POST /sandbox/webhook_endpoints/{id}/faults", s.idempotent(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r2 := r.Clone(r.Context())
			r2.Method = http.MethodPut
			s.controls.ServeHTTP(w, r2)
		})))
	// PUT and DELETE (clear) stay the controls' own; any other method is told that POST is allowed too,
	// not only the PUT and DELETE the controls would list.
	s.sandboxRoute(api, "sandbox:write", "/sandbox/webhook_endpoints/{id}/faults", s.faultsOtherMethods(s.idempotent(s.controls)))
	s.sandboxRoute(api, "sandbox:write", "POST /sandbox/events", s.idempotent(s.controls))
	s.sandboxRoute(api, "sandbox:write", "POST /sandbox/reset", s.idempotent(s.controls))
	// What no route above takes only gets a refusal — 405 with Allow where the path exists under
	// other methods, 404 otherwise — so it needs no permission; under /sandbox/, a production key's
	// is the 404 of an unknown route whatever the path.
	s.refusal(api, "/sandbox/", s.sandboxOnly(s.fallback(api)))
	// Without this, ServeMux would redirect /sandbox to /sandbox/ in HTML, and to a path without
	// the version.
	s.refusal(api, "/sandbox", s.notFoundHandler())
	s.refusal(api, "/", s.fallback(api))
	if err := s.checkRules(); err != nil {
		return nil, err
	}

	var apiMux http.Handler = s.permit(api)
	if s.tel != nil {
		apiMux = routeNamed(api, apiMux)
	}
	authenticated := s.limit.Handler(s.versions.Handler(apiMux))
	apiChain := s.echoVersion(s.auth.Handler(authenticated))
	// The portal's requests come with their principal (the session's) and skip authentication only:
	// the rate limit, the versioning router, the permissions, the idempotency middleware and the
	// request log treat them like any other.
	s.portalAPI = apierror.WithRequestID(s.requestLogged(s.problems.Recover(s.strict(authenticated))))
	root := http.NewServeMux()
	// Issuing credentials is an operator's act, authorised by the admin token rather than an API key;
	// it is versioned like everything else, with no licensee to pin. Without the token the request
	// goes down the API chain like any other, where no route takes it: whoever is not the operator
	// gets exactly what an unknown route gets, and learns nothing of this one.
	root.Handle("POST /{version}/sandbox/credentials",
		s.adminOr(apiChain, s.versions.Handler(routed("POST /sandbox/credentials", s.idempotent(http.HandlerFunc(s.issueCredentials))))))
	// Each version's OpenAPI document is public, like the documentation it is.
	root.Handle("/{version}"+OpenAPIPath, s.versions.Handler(routed("GET "+OpenAPIPath, s.openAPIHandler())))
	root.Handle("/", apiChain)
	// So is the documentation of every problem code, where each problem's type URI points: one page
	// per code, unversioned (a code means the same in every version), HTML to a browser, JSON
	// otherwise. It is looked up before the mux, whose /{version}/… patterns would overlap it
	// ("problems" is never a version name).
	docs := s.docs.Handler(s.problems)
	top := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == strings.TrimSuffix(ProblemsPath, "/") || strings.HasPrefix(r.URL.Path, ProblemsPath) {
			docs.ServeHTTP(w, r)
			return
		}
		root.ServeHTTP(w, r)
	})
	s.root = root
	served := apierror.WithRequestID(s.requestLogged(s.problems.Recover(s.strict(top))))
	// The portal's pages are a web page of their own, not API requests: no request ID, no request
	// log entry (its API requests get both), and its own answers to unknown paths.
	pages := s.problems.Recover(s.portal)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == PortalPath || strings.HasPrefix(r.URL.Path, PortalPath+"/") {
			pages.ServeHTTP(w, r)
			return
		}
		served.ServeHTTP(w, r)
	}), nil
}

// PortalPath is where the webhook portal is served (package portal): its links start with
// Config.BaseURL and this path.
const PortalPath = "/portal"

// portalBaseURL is the portal's Options.BaseURL: the server's base URL and PortalPath, or the
// sandbox's default address when the server has none.
func portalBaseURL(base string) string {
	if base == "" {
		base = apikey.DefaultSandboxBaseURL
	}
	return strings.TrimRight(base, "/") + PortalPath
}

// requestLogged records every request through next in the request log (Config.DisableRequestLog
// aside): inside WithRequestID, whose ID names the entry, and outside authentication, so that
// refused requests are recorded too; outside Recover, so that a panic is recorded as the 500 it
// becomes. The library's middlewares tell the log the key, the version, the Idempotency-Key, a
// replay and the problem's code; the route comes from a slot each request carries, which the
// handler that serves it fills (routed, permit) and the log reads when it is done (routeOf).
func (s *Server) requestLogged(next http.Handler) http.Handler {
	if s.reqlog == nil {
		return next
	}
	logged := s.reqlog.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logged.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), routeKey{}, new(routeSlot))))
	})
}

// routeKey is the context key of a request's routeSlot.
type routeKey struct{}

// routeSlot is where the handler that serves a request names its route for the request log. The
// handler fills it before it returns and the log reads it after: no lock is needed.
type routeSlot struct{ route string }

// routeOf is the request log's Options.Route: the route the request's slot names, or "" when no
// route served it (an unknown path or version, a request refused before routing).
func routeOf(r *http.Request) string {
	if slot, ok := r.Context().Value(routeKey{}).(*routeSlot); ok {
		return slot.route
	}
	return ""
}

// noteRoute names the request's route for the request log: pattern, a pattern of the API mux (below
// the version: "POST /orders", "GET /orders/{id}"), under the version the router served the request
// at — "POST /v1/orders", the documented path. Only the server's own strings go into it: the pattern
// and a version of the registry.
func noteRoute(r *http.Request, pattern string) {
	slot, ok := r.Context().Value(routeKey{}).(*routeSlot)
	d, routed := versioning.FromContext(r.Context())
	if !ok || !routed {
		return
	}
	if method, path, ok := strings.Cut(pattern, " "); ok {
		slot.route = method + " /" + d.Version.Name + path
		return
	}
	slot.route = "/" + d.Version.Name + pattern
}

// routed names pattern as the route of the requests next serves with its method (GET's with HEAD's
// too), for the routes served beside the API mux (noteRoute); next refuses the others with a 405,
// which names no route. The API mux's routes are named by permit.
func routed(pattern string, next http.Handler) http.Handler {
	method, _, _ := strings.Cut(pattern, " ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == method || (method == http.MethodGet && r.Method == http.MethodHead) {
			noteRoute(r, pattern)
		}
		next.ServeHTTP(w, r)
	})
}

// strict answers as problems what net/http's ServeMux would answer in plain text or HTML, before any
// route is looked up:
//
//   - a CONNECT, or a request-target that is not a path, has no route (ServeMux: "404 page not
//     found" in plain text);
//   - a path with an empty, "." or ".." segment has no route either: ServeMux would redirect it to
//     its cleaned form with an HTML body, so that "/v1/webhook_endpoints//events" — an ID left
//     empty — would land on another resource;
//   - a query string with a malformed percent-escape, a ';' or bytes that are not UTF-8 is a 400
//     located at the parameter (apierror.ParseQuery): r.URL.Query() would drop the pair silently and
//     serve the request as if the parameter had not been sent.
//
// A request-target net/http cannot parse at all (a malformed percent-escape in the path) is refused
// by net/http before any handler runs, in plain text; docs/decisions.md lists those exceptions.
func (s *Server) strict(next http.Handler) http.Handler {
	notFound := s.notFoundHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if r.Method == http.MethodConnect || p == "" || p[0] != '/' {
			notFound.ServeHTTP(w, r)
			return
		}
		if !canonicalPath(p) {
			s.problems.Write(w, r, apierror.NotFound(CodeRouteNotFound,
				"no route matches this path: it has an empty, '.' or '..' segment",
				apierror.Path("path", CodeRouteNotFound, "has an empty, '.' or '..' segment")))
			return
		}
		if _, err := apierror.ParseQuery(r); err != nil {
			s.problems.Write(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// canonicalPath reports whether p, which starts with '/', has no empty, "." or ".." segment (a single
// trailing slash aside).
func canonicalPath(p string) bool {
	for seg := range strings.SplitSeq(strings.TrimSuffix(p[1:], "/"), "/") {
		if seg == "" || seg == "." || seg == ".." {
			return p == "/"
		}
	}
	return true
}

// fallback answers what no route took: 405 with Allow when the path exists under other methods, and
// otherwise the same 404 problem a refused sandbox control gets. net/http's own answers are plain text,
// and every error of this API is a problem.
func (s *Server) fallback(mux *http.ServeMux) http.Handler {
	notFound := s.notFoundHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
			if _, pattern := mux.Handler(probe); pattern != "/" && pattern != "" && !strings.HasPrefix(pattern, "/sandbox/") {
				allow = append(allow, m)
			}
		}
		if len(allow) == 0 {
			notFound.ServeHTTP(w, r)
			return
		}
		s.problems.Write(w, r, apierror.MethodNotAllowed(r.Method, allow...))
	})
}

// echoVersion sets X-SVC-Version on every answer to a path on a supported version, so that the
// refusals written before the versioning router runs — authentication (401) and the production rate
// limit (429), which the router's pinning depends on — carry it like every other answer. The router
// sets it again for the requests it serves. An unknown segment is never echoed: it is untrusted input.
func (s *Server) echoVersion(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seg, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if slices.Contains(s.versions.Registry().Supported(s.now()), seg) {
			w.Header().Set(versioning.HeaderVersion, seg)
		}
		next.ServeHTTP(w, r)
	})
}

// faultsOtherMethods passes PUT and DELETE of the faults control to next and answers any other
// method but POST (which has its own route) 405 with the full Allow list.
func (s *Server) faultsOtherMethods(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut || r.Method == http.MethodDelete {
			next.ServeHTTP(w, r)
			return
		}
		// POST, the contract's method, and the controls' own.
		s.problems.Write(w, r, apierror.MethodNotAllowed(r.Method, http.MethodPost, http.MethodPut, http.MethodDelete))
	})
}

func (s *Server) notFoundHandler() http.Handler { return s.problems.NotFoundHandler() }

// sandboxOnly answers a production principal as if the route did not exist, before the idempotency
// middleware can answer anything that would reveal it does.
func (s *Server) sandboxOnly(next http.Handler) http.Handler {
	notFound := s.notFoundHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !sandbox.InSandbox(r) {
			notFound.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

type adminKey struct{}

// adminOr serves admin with requests bearing the admin token, compared in constant time, and passes
// every other request to other untouched, so that a wrong, missing or API-key credential is answered
// by the ordinary chain exactly as on a route that does not exist. Nothing in the answer tells a
// guesser that the token was wrong, or that the route is there.
func (s *Server) adminOr(other, admin http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vals := r.Header.Values(apikey.HeaderAuthorization)
		token, ok := "", false
		if len(vals) == 1 {
			token, ok = strings.CutPrefix(vals[0], "Bearer ")
		}
		if !ok || subtle.ConstantTimeCompare([]byte(token), []byte(s.adminToken)) != 1 {
			other.ServeHTTP(w, r)
			return
		}
		admin.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), adminKey{}, true)))
	})
}

// idempotent puts next behind the idempotency middleware of the request's environment: production
// keys use production's records, sandbox keys and the admin the sandbox's.
//
// A request whose handler appended webhook events (noteAppended) wakes the dispatcher once the
// middleware has returned: by then the request's transaction — which holds the events in
// transactional mode — has committed, so the sequencer numbers them at once instead of at its next
// poll, and the dispatcher delivers them.
func (s *Server) idempotent(next http.Handler) http.Handler {
	live, sbx := s.idem.Handler(next), s.idemSbx.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		appended := new(atomic.Bool)
		r = r.WithContext(context.WithValue(r.Context(), appendedKey{}, appended))
		if p, ok := apikey.FromContext(r.Context()); ok && p.Environment == apikey.Live {
			live.ServeHTTP(w, r)
		} else {
			sbx.ServeHTTP(w, r)
		}
		if appended.Load() {
			s.wake()
		}
	})
}

// mutating wraps the mutating routes a library handler registers (its Register method): the
// idempotency middleware, with versionedLocation inside it, so that the Location stored for a replay
// is the one the client got.
func (s *Server) mutating(next http.Handler) http.Handler {
	return s.idempotent(s.versionedLocation(next))
}

// versionedLocation puts the version back into a Location its handler wrote from the path it was
// served: the router strips the version ("/v1/api_keys" is served as "/api_keys"), so a library
// handler that names the new resource by that path would send a client to a path no version
// serves. A Location that already starts with the version, or that is not a path, is left alone.
func (s *Server) versionedLocation(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&locationWriter{ResponseWriter: w, prefix: "/" + s.versionOf(r)}, r)
	})
}

// locationWriter fixes the Location header once, before the status is written. It passes Header,
// Write and WriteHeader on, and nothing else: Unwrap gives the writer below (the idempotency
// middleware's recorder) to whoever looks for it, so no byte bypasses the record.
type locationWriter struct {
	http.ResponseWriter
	prefix string
	fixed  bool
}

func (lw *locationWriter) fix() {
	if lw.fixed {
		return
	}
	lw.fixed = true
	h := lw.Header()
	if loc := h.Get("Location"); strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, "//") &&
		!strings.HasPrefix(loc, lw.prefix+"/") {
		h.Set("Location", lw.prefix+loc)
	}
}

func (lw *locationWriter) WriteHeader(code int) {
	lw.fix()
	lw.ResponseWriter.WriteHeader(code)
}

func (lw *locationWriter) Write(b []byte) (int, error) {
	lw.fix()
	return lw.ResponseWriter.Write(b)
}

func (lw *locationWriter) Unwrap() http.ResponseWriter { return lw.ResponseWriter }

// appendedKey is the context key of a request's "appended events" flag (see idempotent).
type appendedKey struct{}

// noteAppended records that the request appended webhook events, so that the dispatcher is woken once
// they have committed.
func noteAppended(ctx context.Context) {
	if f, ok := ctx.Value(appendedKey{}).(*atomic.Bool); ok {
		f.Store(true)
	}
}

// idempotencyScope keeps every credential's idempotency records apart: a principal's scope is its
// licensee and environment, so two keys of one evaluation share records and nobody else does. The
// admin's requests have a scope of their own.
func (s *Server) idempotencyScope(r *http.Request) (string, error) {
	if p, ok := apikey.FromContext(r.Context()); ok {
		return p.Scope(), nil
	}
	if admin, _ := r.Context().Value(adminKey{}).(bool); admin {
		return "admin", nil
	}
	return "", apikey.ErrNoPrincipal // a wiring mistake: an opaque 500, never an unscoped record
}

// rangeOwner tells the range handler whose endpoints a request may read: its principal's scope, the
// same value that owns the endpoints.
func (s *Server) rangeOwner(r *http.Request) (string, error) { return scopeOf(r) }

// versionOf is the version the request is served at, which the router put in the context.
func (s *Server) versionOf(r *http.Request) string {
	if d, ok := versioning.FromContext(r.Context()); ok {
		return d.Version.Name
	}
	return s.versions.Registry().Newest().Name
}

// pinnedVersion is the API version the request's licensee is pinned to: webhook events for its
// endpoints are rendered at it.
func (s *Server) pinnedVersion(r *http.Request) string {
	if d, ok := versioning.FromContext(r.Context()); ok && d.Pinned != "" {
		return d.Pinned
	}
	return s.versionOf(r)
}

// versionLicensee names the licensee whose pin governs a request: its principal's scope, so a
// licensee's sandbox and production integrations are pinned (and upgraded) separately. The admin's
// requests have no licensee and are not pinned.
func versionLicensee(r *http.Request) (string, error) {
	if p, ok := apikey.FromContext(r.Context()); ok {
		return p.Scope(), nil
	}
	return "", nil
}

// allowOverride lets sandbox requests try another version than their pin, once, without moving it:
// an integration can test the next version before upgrading. Production requests cannot.
func allowOverride(r *http.Request, _, _, _ string) bool { return sandbox.InSandbox(r) }
