package webhooktest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/webhook"
)

// ErrInjected is the error of a fetch that Source.FailFetches made fail.
var ErrInjected = errors.New("webhooktest: injected fetch failure")

// SourceOptions tune a Source. A nil *SourceOptions and the zero value mean the defaults.
type SourceOptions struct {
	// Now is the clock used to sign deliveries and range responses and to date events; nil means
	// time.Now.
	Now func() time.Time
	// APIVersion is the version segment the range endpoint is served under
	// (GET /{APIVersion}/webhook_endpoints/{id}/events); empty means webhook.DefaultAPIVersion. A
	// request under another version is refused as the producer refuses a licensee pinned elsewhere:
	// 403 version_not_enabled.
	APIVersion string
}

// Source is an in-memory producer for consumer tests. It keeps each stream's events (sequence 1, 2, …
// with no gap), builds signed deliveries of any of them in whatever order a test chooses — so a test
// can drop, duplicate and reorder at will — and serves the range endpoint
//
//	GET /v1/webhook_endpoints/{id}/events?from=&to=&limit=   (Authorization: Bearer <api key>)
//
// with signed bodies, as the platform does (a stream nothing was emitted on is a 404). It is also a webhook.RangeFetcher without HTTP. Fetches
// can be made to fail (FailFetches). A Source is safe for concurrent use; build one with NewSource.
// The zero value is not usable: its FetchRange returns ErrNotBuilt, its ServeHTTP answers the
// opaque 500, and Emit, Event, Request and Deliver panic (as they do on any misuse: they have no
// error result, and a test must not carry on without its events).
type Source struct {
	secret string
	apiKey string
	now    func() time.Time
	mux    *http.ServeMux

	mu      sync.Mutex
	streams map[string][]webhook.Event
	failN   int
	fetches int
}

var (
	_ webhook.RangeFetcher = (*Source)(nil)
	_ http.Handler         = (*Source)(nil)
)

// NewSource returns a Source that signs with secret and accepts apiKey on its range endpoint. It
// panics when secret or apiKey is empty.
func NewSource(secret, apiKey string, opts *SourceOptions) *Source {
	if secret == "" || apiKey == "" {
		panic("webhooktest: NewSource needs a secret and an API key")
	}
	s := &Source{secret: secret, apiKey: apiKey, now: time.Now, streams: make(map[string][]webhook.Event)}
	if opts != nil && opts.Now != nil {
		s.now = opts.Now
	}
	version := webhook.DefaultAPIVersion
	if opts != nil && opts.APIVersion != "" {
		version = opts.APIVersion
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /{version}/webhook_endpoints/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		if v := r.PathValue("version"); v != version {
			apierror.Write(w, r, apierror.Forbidden("version_not_enabled", "this licensee is pinned to "+version,
				apierror.Path("version", "version_not_enabled", "this licensee is pinned to "+version)))
			return
		}
		s.serveRange(w, r)
	})
	return s
}

// ErrNotBuilt: a Source that NewSource did not build.
var ErrNotBuilt = errors.New("webhooktest: Source not built with NewSource")

// Emit appends an event of type typ with data to stream and returns it. Its sequence is the stream's
// next (1 for a new stream), and it names stream as its endpoint, as the producer's envelopes do.
func (s *Source) Emit(stream, typ string, data any) webhook.Event {
	if s == nil || s.mux == nil {
		panic(ErrNotBuilt.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := NewEvent(uint64(len(s.streams[stream]))+1, typ, data, s.now())
	ev.Endpoint = stream
	s.streams[stream] = append(s.streams[stream], ev)
	return ev
}

// Event returns the stream's event with sequence seq. It panics when there is none.
func (s *Source) Event(stream string, seq uint64) webhook.Event {
	if s == nil || s.mux == nil {
		panic(ErrNotBuilt.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	evs := s.streams[stream]
	if seq == 0 || seq > uint64(len(evs)) {
		panic("webhooktest: no event " + strconv.FormatUint(seq, 10) + " in stream " + stream)
	}
	return evs[seq-1]
}

// Events returns a copy of the stream's events, in sequence order.
func (s *Source) Events(stream string) []webhook.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]webhook.Event(nil), s.streams[stream]...)
}

// Request returns a signed delivery of the stream's event seq to target, as an incoming server request.
func (s *Source) Request(target, stream string, seq uint64) *http.Request {
	return NewRequest(target, s.Event(stream, seq), s.now(), s.secret)
}

// Deliver serves a signed delivery of the stream's event seq to h and returns the recorded response.
func (s *Source) Deliver(h http.Handler, stream string, seq uint64) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, s.Request("/webhooks", stream, seq))
	return rec
}

// FailFetches makes the next n fetches fail — FetchRange calls and range requests alike (503 with
// Retry-After over HTTP).
func (s *Source) FailFetches(n int) {
	s.mu.Lock()
	s.failN = n
	s.mu.Unlock()
}

// Fetches returns how many fetches were made, failed ones included.
func (s *Source) Fetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetches
}

// FetchRange returns the stream's events from..to that exist, as the range endpoint would with no page
// limit.
func (s *Source) FetchRange(ctx context.Context, stream string, from, to uint64) ([]webhook.Event, error) {
	if s == nil || s.mux == nil {
		return nil, ErrNotBuilt
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	evs, _, err := s.fetch(stream, from, to, 0)
	return evs, err
}

// fetch returns up to limit (0: no limit) of the stream's events from..to and whether more follow
// within the range.
func (s *Source) fetch(stream string, from, to uint64, limit int) ([]webhook.Event, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fetches++
	if s.failN > 0 {
		s.failN--
		return nil, false, ErrInjected
	}
	all := s.streams[stream]
	if from == 0 || from > to || from > uint64(len(all)) {
		return []webhook.Event{}, false, nil
	}
	end := min(to, uint64(len(all))) // inclusive
	more := false
	if limit > 0 && end-from+1 > uint64(limit) {
		end, more = from+uint64(limit)-1, true
	}
	return append([]webhook.Event(nil), all[from-1:end]...), more, nil
}

// ServeHTTP serves the range endpoint.
func (s *Source) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s == nil || s.mux == nil {
		apierror.Write(w, r, ErrNotBuilt)
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Source) serveRange(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+s.apiKey {
		apierror.Write(w, r, apierror.Unauthenticated("api_key_invalid", "the API key is missing, unknown, expired or revoked"))
		return
	}
	q := r.URL.Query()
	from, ok := queryUint(w, r, q.Get("from"), "from", 1, webhook.MaxSequence, 0)
	if !ok {
		return
	}
	to, ok := queryUint(w, r, q.Get("to"), "to", from, webhook.MaxSequence, 0)
	if !ok {
		return
	}
	limit, ok := queryUint(w, r, q.Get("limit"), "limit", 1, webhook.MaxPageSize, webhook.DefaultPageSize)
	if !ok {
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	_, known := s.streams[id]
	s.mu.Unlock()
	if !known {
		apierror.Write(w, r, apierror.NotFound("webhook_endpoint_not_found", "no webhook endpoint has this ID",
			apierror.Path("id", "webhook_endpoint_not_found", "no webhook endpoint has this ID")))
		return
	}
	evs, more, err := s.fetch(id, from, to, int(limit))
	if err != nil {
		apierror.Write(w, r, apierror.Unavailable(time.Second, "", "the event log is unavailable"))
		return
	}
	body, err := json.Marshal(webhook.EventList{Object: "list", Data: evs, HasMore: more})
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(webhook.HeaderSignature, Header(body, s.now(), s.secret))
	_, _ = w.Write(body)
}

// queryUint parses a query parameter in [lo, hi]; def is used when it is absent (0: required).
func queryUint(w http.ResponseWriter, r *http.Request, v, name string, lo, hi, def uint64) (uint64, bool) {
	if v == "" && def != 0 {
		return def, true
	}
	if v == "" {
		apierror.Write(w, r, apierror.MissingQuery(name))
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n < lo || n > hi {
		apierror.Write(w, r, apierror.Invalid(apierror.Query(name, "invalid_range",
			"must be an integer from "+strconv.FormatUint(lo, 10)+" to "+strconv.FormatUint(hi, 10))))
		return 0, false
	}
	return n, true
}
