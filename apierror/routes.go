package apierror

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/svcplatform/conventions/internal/reqnote"
)

// Codes of the problems a router writes for a request no route serves.
const (
	// CodeRouteNotFound is the code of the 404 for a method and path no route matches.
	CodeRouteNotFound = "route_not_found"
	// CodeMethodNotAllowed is the code of the 405 for a path whose routes take other methods.
	CodeMethodNotAllowed = "method_not_allowed"
)

// RouteNotFound returns the 404 problem for a request that no route serves, located at the path.
// It never quotes the path: an unmatched path is untrusted input, and a key pasted into a URL must not
// come back in the body.
func RouteNotFound() *Error {
	const detail = "no route matches this method and path"
	return NotFound(CodeRouteNotFound, detail, Path("path", CodeRouteNotFound, detail))
}

// MethodNotAllowed returns the 405 problem for a request whose path has routes, but none for its
// method: the Allow header lists the methods that are (RFC 9110 §15.5.6 requires it), and the one
// violation, located at the path, names them.
func MethodNotAllowed(method string, allow ...string) *Error {
	list := strings.Join(allow, ", ")
	detail := "this path accepts " + list
	if validMethod(method) {
		detail = method + " is not allowed here; " + detail
	}
	return New(http.StatusMethodNotAllowed, CodeMethodNotAllowed, detail,
		Path("path", CodeMethodNotAllowed, detail)).WithHeader("Allow", list)
}

// validMethod reports whether m is an RFC 9110 token short enough to repeat in a detail.
func validMethod(m string) bool {
	if m == "" || len(m) > 16 {
		return false
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// NotFoundHandler answers every request with RouteNotFound: the handler to give a router's
// not-found hook (chi's NotFound, gorilla's NotFoundHandler).
func (wr Writer) NotFoundHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { wr.Write(w, r, RouteNotFound()) })
}

// MethodNotAllowedHandler answers every request with MethodNotAllowed, taking the methods from the
// Allow header the router has already set on the response (chi sets it before calling its
// MethodNotAllowed hook). Without one it answers 405 naming no method, with an empty Allow, which
// RFC 9110 permits for a resource that takes none.
func (wr Writer) MethodNotAllowedHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		allow := splitAllow(w.Header().Values("Allow"))
		w.Header().Del("Allow")
		wr.Write(w, r, MethodNotAllowed(r.Method, allow...))
	})
}

func splitAllow(values []string) []string {
	var out []string
	for _, v := range values {
		for m := range strings.SplitSeq(v, ",") {
			if m = strings.TrimSpace(m); m != "" && !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}

// ServeMux returns a handler that serves mux, except that the answers net/http's ServeMux writes
// itself for a request no pattern matches — a plain-text "404 page not found", and since Go 1.22 a
// plain-text 405 for a path whose patterns take other methods — are problems instead: RouteNotFound
// and MethodNotAllowed, with the Allow header the mux computed. Everything a pattern matches,
// redirects included, is served by mux as it is, with r.Pattern and PathValue set as usual.
//
//	mux := http.NewServeMux()
//	mux.HandleFunc("POST /v1/orders", createOrder)
//	srv := &http.Server{Handler: apierror.WithRequestID(problems.ServeMux(mux))}
func (wr Writer) ServeMux(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			reqnote.From(r.Context()).SetRoute(pattern)
			mux.ServeHTTP(w, r)
			return
		}
		// No pattern: h is the mux's own 404 or 405 answer (or a redirect, which passes through).
		// It runs against a writer that keeps a 404 or 405 off the wire, so that the Allow header
		// it computed is the only thing kept.
		cw := &catchWriter{ResponseWriter: w}
		h.ServeHTTP(cw, r)
		switch cw.status {
		case http.StatusNotFound:
			w.Header().Del("Content-Type")
			wr.Write(w, r, RouteNotFound())
		case http.StatusMethodNotAllowed:
			allow := splitAllow(w.Header().Values("Allow"))
			w.Header().Del("Allow")
			w.Header().Del("Content-Type")
			wr.Write(w, r, MethodNotAllowed(r.Method, allow...))
		}
	})
}

// catchWriter holds back a 404 or 405 and its body; any other answer goes through.
type catchWriter struct {
	http.ResponseWriter
	status int // 404 or 405 once caught
	passed bool
}

func (c *catchWriter) WriteHeader(code int) {
	if c.status != 0 || c.passed {
		return
	}
	if code == http.StatusNotFound || code == http.StatusMethodNotAllowed {
		c.status = code
		return
	}
	c.passed = true
	c.ResponseWriter.WriteHeader(code)
}

func (c *catchWriter) Write(b []byte) (int, error) {
	if c.status == 0 && !c.passed {
		c.WriteHeader(http.StatusOK)
	}
	if c.status != 0 {
		return len(b), nil
	}
	return c.ResponseWriter.Write(b)
}

func (c *catchWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// WriteJSON is Writer.WriteJSON with the zero Writer's settings (or the Writer that Handler put in
// the request's context).
func WriteJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	Writer{}.WriteJSON(w, r, status, v)
}

// WriteJSON writes v as a successful application/json response with the given 2xx status: the body
// is marshalled before anything is sent, so a value that cannot be marshalled (a channel, a
// json.Marshaler that fails) becomes the opaque 500 problem, logged, instead of a 200 with half a
// body. A status outside 2xx, or 204 and 205, which carry no body, is a programming error answered
// the same way: failures are problems, written with Write.
func (wr Writer) WriteJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	if status < 200 || status > 299 || status == http.StatusNoContent || status == http.StatusResetContent {
		wr.Write(w, r, fmt.Errorf("apierror: WriteJSON with status %d: a success needs a 2xx with a body; write errors with Write", status))
		return
	}
	body, err := json.Marshal(v)
	if err != nil {
		wr.Write(w, r, fmt.Errorf("apierror: WriteJSON: %w", err))
		return
	}
	// One allocation for the three header values; each slice is capped so an Add cannot overwrite a
	// neighbour.
	vals := [...]string{"application/json", "nosniff", strconv.Itoa(len(body) + 1)}
	h := w.Header()
	h["Content-Type"], h["X-Content-Type-Options"], h["Content-Length"] = vals[0:1:1], vals[1:2:2], vals[2:3:3]
	w.WriteHeader(status)
	_, _ = w.Write(body)
	_, _ = w.Write(newline)
}

var newline = []byte{'\n'}
