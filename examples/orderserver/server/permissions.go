package server

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/sandbox"
)

// routeRule is what a request needs to reach one pattern of the API mux, as routes declares it.
type routeRule struct {
	// permission is what a restricted key needs ("orders:write"); "" for a route that only refuses
	// (404, 405) and so needs none, and for one open to every key (anyKey).
	permission string
	// anyKey marks a route every API key may call, restricted or not, such as the changelog: it
	// serves what is public knowledge about the API, so no permission guards it.
	anyKey bool
	// sandbox marks a sandbox control, which answers a production key exactly like an unknown route:
	// permit lets a production key through to that 404 rather than tell it, with a 403, that the
	// route exists.
	sandbox bool
}

// route registers h at pattern on the API mux, for keys that have permission.
func (s *Server) route(api *http.ServeMux, permission, pattern string, h http.Handler) {
	api.Handle(pattern, h)
	s.declare(permission, pattern)
}

// sandboxRoute registers a sandbox control: h at pattern, for sandbox keys that have permission;
// production keys get the 404 of an unknown route.
func (s *Server) sandboxRoute(api *http.ServeMux, permission, pattern string, h http.Handler) {
	api.Handle(pattern, s.sandboxOnly(h))
	s.rule(pattern, routeRule{permission: permission, sandbox: true})
}

// anyKey registers h at pattern on the API mux, for every API key, restricted or not: a route
// whose answer is the same for every licensee and tells nothing a key protects.
func (s *Server) anyKey(api *http.ServeMux, pattern string, h http.Handler) {
	api.Handle(pattern, h)
	s.rule(pattern, routeRule{anyKey: true})
}

// refusal registers h, which only ever refuses (404, 405), at pattern: every key may be refused.
func (s *Server) refusal(api *http.ServeMux, pattern string, h http.Handler) {
	api.Handle(pattern, h)
	s.rule(pattern, routeRule{})
}

// declare names the permission of patterns a library handler registered itself (its Register
// method), right after the call: the patterns must be the ones it registered, which checkRules
// verifies.
func (s *Server) declare(permission string, patterns ...string) {
	if permission == "" {
		s.ruleErrs = append(s.ruleErrs, fmt.Errorf("routes: %v declared without a permission", patterns))
	}
	for _, p := range patterns {
		s.rule(p, routeRule{permission: permission})
	}
}

func (s *Server) rule(pattern string, r routeRule) {
	if _, dup := s.rules[pattern]; dup {
		s.ruleErrs = append(s.ruleErrs, fmt.Errorf("routes: %q is declared twice", pattern))
		return
	}
	s.rules[pattern] = r
}

// checkRules refuses declarations that would not do what they say: a permission outside the API's
// vocabulary, a pattern the API mux does not route to itself (a typo beside a library's Register),
// a permission no route needs.
func (s *Server) checkRules() error {
	errs := s.ruleErrs
	used := make(map[string]bool)
	for _, pattern := range slices.Sorted(maps.Keys(s.rules)) {
		r := s.rules[pattern]
		if r.permission != "" && !slices.Contains(permissions, r.permission) {
			errs = append(errs, fmt.Errorf("routes: %q requires %q, which is not one of the API's permissions", pattern, r.permission))
		}
		used[r.permission] = true
		if _, got := s.api.Handler(probe(pattern)); got != pattern {
			errs = append(errs, fmt.Errorf("routes: %q is declared, but a request for it goes to %q", pattern, got))
		}
	}
	for _, p := range permissions {
		if !used[p] {
			errs = append(errs, fmt.Errorf("routes: no route requires the permission %q", p))
		}
	}
	return errors.Join(errs...)
}

// probe is a request that pattern matches: its method (GET for none) and its path with every
// wildcard filled in.
func probe(pattern string) *http.Request {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = http.MethodGet, pattern
	}
	segs := strings.Split(path, "/")
	for i, seg := range segs {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			segs[i] = "x"
		}
	}
	return &http.Request{Method: method, URL: &url.URL{Path: strings.Join(segs, "/")}, Header: http.Header{}}
}

// permit is the one place where restricted keys are held to their permissions. In front of the API
// mux, behind the versioning router (which strips the version), it finds the route the request will
// take and lets it through only when its key has the permission declared there: the full key has
// every one; any other gets 403 permission_denied, located at the Authorization header and naming the
// permission (apikey.Authenticator.Require). A pattern with no declaration admits the full key only:
// a route added without one is closed to restricted keys, never open to them (default deny).
func (s *Server) permit(api *http.ServeMux) http.Handler {
	required := make(map[string]http.Handler, len(permissions))
	for _, p := range permissions {
		required[p] = s.auth.Require(p, api)
	}
	const detail = "this API key is restricted, and this route admits only an unrestricted key: no permission covers it"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := api.Handler(r)
		rule, declared := s.rules[pattern]
		// The request log names the route the request asked for, refused for want of a permission
		// or not; never a route that only refuses, nor a sandbox control to a production key, which
		// is told that it does not exist.
		if declared && (rule.permission != "" || rule.anyKey) && !(rule.sandbox && !sandbox.InSandbox(r)) {
			noteRoute(r, pattern)
		}
		switch {
		case !declared:
			if p, ok := apikey.FromContext(r.Context()); ok && p.Permissions != nil {
				s.log.ErrorContext(r.Context(), "server: a route has no declared permission; restricted keys are refused it", "pattern", pattern)
				s.problems.Write(w, r, apierror.Forbidden(apikey.CodePermissionDenied, detail,
					apierror.Header(apikey.HeaderAuthorization, apikey.CodePermissionDenied, detail)))
				return
			}
			api.ServeHTTP(w, r)
		case rule.permission == "", rule.sandbox && !sandbox.InSandbox(r):
			api.ServeHTTP(w, r)
		default:
			required[rule.permission].ServeHTTP(w, r)
		}
	})
}

// permissionOf is the permission a request for method and path (below the version) needs, and
// whether it is a route of the API mux that declares what it needs: a permission, or none for a
// route open to every key (anyKey; the permission is then ""). The OpenAPI documents show it per
// operation.
func (s *Server) permissionOf(method, path string) (string, bool) {
	_, pattern := s.api.Handler(probe(method + " " + path))
	r, ok := s.rules[pattern]
	return r.permission, ok && (r.permission != "" || r.anyKey)
}
