package requestlog_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/internal/testclock"
	"github.com/svcplatform/conventions/requestlog"
	"github.com/svcplatform/conventions/versioning"
)

// t0 is the tests' instant, to the microsecond as the log keeps it.
var t0 = time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// service is a small API behind the library's real middlewares, with a request log: the chain
// the package documentation shows.
type service struct {
	clock   *testclock.Clock
	store   *requestlog.MemoryStore
	log     *requestlog.Log
	handler http.Handler
	keys    map[string]apikey.Credentials // by licensee
}

// newService builds the chain; opts (may be nil) configure the Log, whose Store and Now it sets.
func newService(t *testing.T, opts *requestlog.Options) *service {
	t.Helper()
	ctx := context.Background()
	s := &service{clock: testclock.New(t0), store: must(requestlog.NewMemoryStore(nil)), keys: map[string]apikey.Credentials{}}
	iss := must(apikey.NewIssuer(apikey.NewMemoryCredentialStore(), &apikey.IssuerOptions{Now: s.clock.Now}))
	for _, lic := range []string{"lic_a", "lic_b"} {
		s.keys[lic] = must(iss.Issue(ctx, apikey.Evaluation{Licensee: lic, Environment: apikey.Live}))
	}
	auth := must(apikey.NewAuthenticator(iss, nil))
	idem := must(idempotency.New(&idempotency.Options{Scope: apikey.RequestScope, Now: s.clock.Now}))
	reg := must(versioning.NewRegistry([]versioning.Version{{Name: "v1"}, {Name: "v2"}},
		[]versioning.Change{{Name: "nothing_visible", Version: "v2", Description: "Nothing a client sees."}}))
	router := must(versioning.New(reg, &versioning.Options{Licensee: apikey.RequestScope, Now: s.clock.Now}))

	var o requestlog.Options
	if opts != nil {
		o = *opts
	}
	o.Store, o.Now = s.store, s.clock.Now
	if o.FlushInterval == 0 {
		o.FlushInterval = time.Hour // the tests flush
	}
	s.log = must(requestlog.New(&o))
	t.Cleanup(func() { _ = s.log.Close(context.Background()) })
	reads := must(requestlog.NewRequestsHandler(s.store, apikey.RequestScope, nil))

	mux := http.NewServeMux()
	mux.HandleFunc("POST /{version}/orders", func(w http.ResponseWriter, r *http.Request) {
		s.clock.Advance(3 * time.Millisecond) // the handler's work, as the log measures it
		var in struct {
			Amount int `json:"amount"`
		}
		if err := apierror.Decode(r, &in, nil); err != nil {
			idempotency.NotPerformed(w)
			apierror.Write(w, r, err)
			return
		}
		if in.Amount > 1000 {
			// Done and stored: a retry replays this problem.
			apierror.Write(w, r, apierror.Unprocessable("amount_over_limit", "the amount is over the account's limit",
				apierror.Body("/amount", "amount_over_limit", "is over the limit")))
			return
		}
		apierror.WriteJSON(w, r, http.StatusCreated, map[string]any{"id": "ord_1", "amount": in.Amount})
	})
	mux.HandleFunc("GET /{version}/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		apierror.Write(w, r, apierror.NotFound("order_not_found", "no order has this ID",
			apierror.Path("id", "order_not_found", "no order has this ID")))
	})
	mux.HandleFunc("GET /{version}/boom", func(http.ResponseWriter, *http.Request) { panic("boom") })
	mux.Handle("GET /{version}/requests", reads)
	mux.Handle("GET /{version}/requests/{request_id}", reads)

	problems := apierror.Writer{}
	var h http.Handler = problems.ServeMux(mux)
	h = router.Handler(h)
	h = idem.Handler(h)
	h = auth.Handler(h)
	h = problems.Recover(h)
	h = s.log.Handler(h)
	s.handler = apierror.WithRequestID(problems.Handler(h))
	return s
}

// do sends a request as licensee ("" for none) with an Idempotency-Key when idemKey is set, and
// returns the response and its request ID.
func (s *service) do(t *testing.T, method, target, licensee, idemKey, body string) (*httptest.ResponseRecorder, string) {
	t.Helper()
	var r *http.Request
	if body == "" {
		r = httptest.NewRequest(method, target, nil)
	} else {
		r = httptest.NewRequest(method, target, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
	}
	if licensee != "" {
		r.Header.Set("Authorization", "Bearer "+s.keys[licensee].APIKey)
	}
	if idemKey != "" {
		r.Header.Set(idempotency.HeaderKey, idemKey)
	}
	w := httptest.NewRecorder()
	s.handler.ServeHTTP(w, r)
	id := w.Header().Get(apierror.HeaderRequestID)
	require.NotEmpty(t, id)
	return w, id
}

// entry flushes the log and returns the stored entry of the request.
func (s *service) entry(t *testing.T, owner, requestID string) requestlog.Entry {
	t.Helper()
	require.NoError(t, s.log.Flush(context.Background()))
	e, err := s.store.Get(context.Background(), owner, requestID)
	require.NoError(t, err, "entry of %s for %q", requestID, owner)
	return e
}

// owner is a licensee's owner, as the Authenticator notes it.
func owner(licensee string) string { return "live:" + licensee }

// decode decodes a JSON response body into a generic value.
func decode(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var v map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &v), w.Body.String())
	return v
}
