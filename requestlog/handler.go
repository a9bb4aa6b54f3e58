package requestlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/svcplatform/conventions"
	"github.com/svcplatform/conventions/apierror"
)

// Limits of the list's limit query parameter.
const (
	DefaultListLimit = 20
	MaxListLimit     = 100
)

// CodeRequestNotFound is the code of the 404 for a request ID the caller has no entry of: unknown,
// pruned by the retention, or another owner's, which are all the same answer.
const CodeRequestNotFound = "request_not_found"

// Codes of the list's 400s, each located at its query parameter; they are the producer's (package
// webhook/producer) for the same conditions.
const (
	codeRepeated      = "query_repeated"
	codeNotInteger    = "not_an_integer"
	codeOutOfRange    = "out_of_range"
	codeRangeInverted = "range_inverted"
	codeInvalidCursor = "invalid_cursor"
	codeInvalidValue  = "invalid_value"
)

// RequestsHandlerOptions configure a RequestsHandler. A nil *RequestsHandlerOptions and the zero
// value mean the defaults.
type RequestsHandlerOptions struct {
	// Problems writes the problem responses: its TypeBase, and its Logger (nil means Logger). Fields
	// left empty come from the Writer apierror.Writer.Handler put in the request's context, else
	// apierror's defaults.
	Problems apierror.Writer
	// Logger records internal errors (the client sees an opaque 500); nil means no logging.
	Logger *slog.Logger
}

// RequestsHandler is the read API of a request log, what support (or the caller itself) reads to
// learn what became of a request:
//
//	GET /v1/requests?status=4xx&route=POST+/v1/orders&limit=20&starting_after=req_…
//	GET /v1/requests/req_2vq4mxd1k8c0f6hz7t3w9bn5ya
//
// It is mounted behind authentication: each request reads only the entries of the owner its caller
// function names, and another owner's entry is the same 404 request_not_found as an unknown one. See
// the package documentation for the wire format and the parameters.
//
// A RequestsHandler is safe for concurrent use. Build one with NewRequestsHandler; the zero value is
// not usable: it answers every request with the opaque 500 (ErrNotBuilt).
type RequestsHandler struct {
	store  Store
	caller conventions.CallerFunc
	errs   apierror.Writer
}

// NewRequestsHandler returns the read API of the entries in store; caller names the owner whose
// entries a request may read (apikey.RequestScope, the Owner the Log records). Its error is
// written as the response; an owner of "" reads nothing. A nil store or caller is an error.
func NewRequestsHandler(store Store, caller conventions.CallerFunc, opts *RequestsHandlerOptions) (*RequestsHandler, error) {
	if store == nil || caller == nil {
		return nil, errors.New("requestlog: NewRequestsHandler needs a Store and a caller function")
	}
	h := &RequestsHandler{store: store, caller: caller}
	if opts != nil {
		h.errs = opts.Problems
		if h.errs.Logger == nil {
			h.errs.Logger = opts.Logger
		}
	}
	return h, nil
}

// Register mounts the handler on mux under the version segment version ("" for none):
// GET /{version}/requests and GET /{version}/requests/{request_id}. To mount it another way, give
// ServeHTTP a pattern whose wildcard for the ID is {request_id}; a pattern without it lists.
func (h *RequestsHandler) Register(mux *http.ServeMux, version string) {
	prefix := "GET /"
	if version != "" {
		prefix += version + "/"
	}
	mux.Handle(prefix+"requests", h)
	mux.Handle(prefix+"requests/{request_id}", h)
}

// requestJSON is one entry as the API shows it; members without a value are null.
type requestJSON struct {
	Object         string  `json:"object"`
	ID             string  `json:"id"`
	APIKey         *string `json:"api_key"`
	Method         string  `json:"method"`
	Route          *string `json:"route"`
	Status         int     `json:"status"`
	Code           *string `json:"code"`
	IdempotencyKey *string `json:"idempotency_key"`
	Replayed       bool    `json:"replayed"`
	Version        *string `json:"version"`
	LatencyMS      int64   `json:"latency_ms"`
	Created        int64   `json:"created"`
}

type requestList struct {
	Object  string        `json:"object"`
	Data    []requestJSON `json:"data"`
	HasMore bool          `json:"has_more"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func view(e Entry) requestJSON {
	return requestJSON{Object: "request", ID: e.RequestID, APIKey: nullable(e.KeyID), Method: e.Method,
		Route: nullable(e.Route), Status: e.Status, Code: nullable(e.Code), IdempotencyKey: nullable(e.IdempotencyKey),
		Replayed: e.Replayed, Version: nullable(e.Version), LatencyMS: e.Latency.Milliseconds(), Created: e.At.Unix()}
}

// maxRequestID bounds a request ID the API looks up: longer ones name no entry (see
// apierror.RequestIDs).
const maxRequestID = 128

// ServeHTTP implements http.Handler.
func (h *RequestsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h == nil || h.store == nil {
		apierror.Write(w, r, errZeroRequestsHandler)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.errs.Write(w, r, apierror.MethodNotAllowed(r.Method, http.MethodGet, http.MethodHead))
		return
	}
	owner, err := h.caller(r)
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	if id := r.PathValue("request_id"); id != "" {
		h.get(w, r, owner, id)
		return
	}
	query, err := apierror.ParseQuery(r)
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	q, err := parseListQuery(query)
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	list := requestList{Object: "list", Data: []requestJSON{}}
	if owner != "" {
		q.Owner = owner
		entries, more, err := h.store.List(r.Context(), q)
		if err != nil {
			h.errs.Write(w, r, err)
			return
		}
		list.HasMore = more
		for _, e := range entries {
			list.Data = append(list.Data, view(e))
		}
	}
	h.writeJSON(w, r, list)
}

func (h *RequestsHandler) get(w http.ResponseWriter, r *http.Request, owner, id string) {
	var e Entry
	err := ErrNotFound
	if owner != "" && len(id) <= maxRequestID {
		e, err = h.store.Get(r.Context(), owner, id)
	}
	switch {
	case errors.Is(err, ErrNotFound):
		h.errs.Write(w, r, apierror.NotFound(CodeRequestNotFound, "no request of yours has this ID",
			apierror.Path("request_id", CodeRequestNotFound, "names no request of yours")))
		return
	case err != nil:
		h.errs.Write(w, r, err)
		return
	}
	h.writeJSON(w, r, view(e))
}

// writeJSON answers v, never cached: it is one caller's, and a list grows with every request.
func (h *RequestsHandler) writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		h.errs.Write(w, r, err)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// Bounds of the list's string filters: each is something the server wrote (a code, a key ID, a
// route pattern, a request ID), so a longer value matches nothing and is refused instead.
const (
	maxCode  = 64
	maxKeyID = 64
)

// parseListQuery reads the list's parameters into a Query (without its Owner), returning a 400
// *apierror.Error that lists every bad parameter, each located at its name. An empty parameter counts
// as absent; parameters it does not know are ignored, as the library's other lists do.
func parseListQuery(q url.Values) (Query, error) {
	out := Query{Limit: DefaultListLimit}
	var c apierror.Collector
	if v, ok := queryString(&c, q, "limit"); ok {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil && !errors.Is(err, strconv.ErrRange):
			c.Add(apierror.Query("limit", codeNotInteger, "must be a decimal integer"))
		case err != nil || n < 1 || n > MaxListLimit:
			c.Add(apierror.Query("limit", codeOutOfRange, fmt.Sprintf("must be between 1 and %d", MaxListLimit)))
		default:
			out.Limit = n
		}
	}
	if v, ok := queryString(&c, q, "status"); ok {
		switch {
		case len(v) == 3 && v[0] >= '1' && v[0] <= '5' && v[1:] == "xx":
			out.StatusClass = int(v[0] - '0')
		default:
			n, err := strconv.Atoi(v)
			if c.Check(err == nil && len(v) == 3 && n >= 100 && n <= 599,
				apierror.Query("status", codeInvalidValue, "must be a status code (404) or a class of them (4xx)")) {
				out.Status = n
			}
		}
	}
	if v, ok := queryString(&c, q, "code"); ok {
		if c.Check(len(v) <= maxCode && isToken(v, false), apierror.Query("code", codeInvalidValue,
			fmt.Sprintf("must be a problem code: up to %d letters, digits and underscores", maxCode))) {
			out.Code = v
		}
	}
	if v, ok := queryString(&c, q, "api_key"); ok {
		if c.Check(len(v) <= maxKeyID && len(v) > len("key_") && v[:len("key_")] == "key_" && isToken(v, false),
			apierror.Query("api_key", codeInvalidValue, "must be the ID of an API key (key_…), never the key")) {
			out.KeyID = v
		}
	}
	if v, ok := queryString(&c, q, "route"); ok {
		if c.Check(len(v) <= maxRoute && isPrintable(v), apierror.Query("route", codeInvalidValue,
			fmt.Sprintf("must be a route pattern such as \"POST /v1/orders\", up to %d bytes", maxRoute))) {
			out.Route = v
		}
	}
	since, sinceOK := queryTime(&c, q, "since")
	until, untilOK := queryTime(&c, q, "until")
	if sinceOK {
		out.Since = since
	}
	if untilOK {
		if c.Check(!sinceOK || until.After(since), apierror.Query("until", codeRangeInverted, "must be after since")) {
			out.Until = until
		}
	}
	if v, ok := queryString(&c, q, "starting_after"); ok {
		if c.Check(len(v) <= maxRequestID && isToken(v, true), apierror.Query("starting_after", codeInvalidCursor,
			"must be the id of a request (req_…) from a previous page")) {
			out.After = v
		}
	}
	if err := c.Err(); err != nil {
		return Query{}, err
	}
	return out, nil
}

// queryString reads one parameter that must not repeat; absent and empty report false.
func queryString(c *apierror.Collector, q url.Values, name string) (string, bool) {
	vs := q[name]
	switch {
	case len(vs) == 0 || (len(vs) == 1 && vs[0] == ""):
		return "", false
	case len(vs) > 1:
		c.Add(apierror.Query(name, codeRepeated, "must be given once"))
		return "", false
	}
	return vs[0], true
}

// queryTime reads a time parameter in Unix seconds.
func queryTime(c *apierror.Collector, q url.Values, name string) (time.Time, bool) {
	v, ok := queryString(c, q, name)
	if !ok {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		c.Add(apierror.Query(name, codeNotInteger, "must be a time in Unix seconds"))
		return time.Time{}, false
	case err != nil || n < 0 || n > 1<<40:
		c.Add(apierror.Query(name, codeOutOfRange, "must be a time in Unix seconds, not before 1970"))
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

// isToken reports whether s is letters, digits and '_' — and, for a request ID, '-', '.', ':' and
// '/' too (apierror.RequestIDs' alphabet).
func isToken(s string, requestID bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' ||
			requestID && (c == '-' || c == '.' || c == ':' || c == '/')) {
			return false
		}
	}
	return true
}

// isPrintable reports whether s has no control character (ParseQuery has checked that it is UTF-8).
func isPrintable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	return true
}
