package requestlog_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/requestlog"
)

// readAPI is a RequestsHandler on a memory store holding entries of "live:lic_a" (and one of
// another owner), mounted on a mux by Register, with the caller taken from a header.
func readAPI(t testing.TB, entries ...requestlog.Entry) (http.Handler, *requestlog.MemoryStore) {
	t.Helper()
	store := must(requestlog.NewMemoryStore(nil))
	require.NoError(t, store.Insert(context.Background(), entries))
	h := must(requestlog.NewRequestsHandler(store, func(r *http.Request) (string, error) {
		switch who := r.Header.Get("X-Caller"); who {
		case "error":
			return "", apierror.Unauthenticated(apikey.CodeMissing, "header Authorization is required")
		default:
			return who, nil
		}
	}, nil))
	mux := http.NewServeMux()
	h.Register(mux, "v1")
	return apierror.WithRequestID(mux), store
}

func get(h http.Handler, target, caller string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	r.Header.Set("X-Caller", caller)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestReadAPIShapes(t *testing.T) {
	full := requestlog.Entry{RequestID: "req_full", Owner: "live:lic_a", KeyID: "key_abc", Environment: "live", Method: "POST",
		Route: "POST /v1/orders", Status: 409, Code: "idempotency_key_in_use", IdempotencyKey: "order-7", Replayed: true,
		Version: "v2", Latency: 3700 * time.Microsecond, At: time.Unix(1767225661, 500_000_000).UTC()}
	bare := requestlog.Entry{RequestID: "req_bare", Owner: "live:lic_a", Method: "GET", Status: 200, Latency: 250 * time.Microsecond,
		At: time.Unix(1767225600, 0).UTC()}
	h, _ := readAPI(t, full, bare)

	w := get(h, "/v1/requests/req_full", "live:lic_a")
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, "application/json", w.Header().Get("Content-Type"))
	require.Equal(t, "no-store", w.Header().Get("Cache-Control"))
	require.JSONEq(t, `{"object":"request","id":"req_full","api_key":"key_abc","method":"POST","route":"POST /v1/orders",
		"status":409,"code":"idempotency_key_in_use","idempotency_key":"order-7","replayed":true,"version":"v2",
		"latency_ms":3,"created":1767225661}`, w.Body.String())

	w = get(h, "/v1/requests/req_bare", "live:lic_a")
	require.JSONEq(t, `{"object":"request","id":"req_bare","api_key":null,"method":"GET","route":null,"status":200,"code":null,
		"idempotency_key":null,"replayed":false,"version":null,"latency_ms":0,"created":1767225600}`, w.Body.String())

	w = get(h, "/v1/requests?limit=1", "live:lic_a")
	require.Equal(t, http.StatusOK, w.Code)
	require.JSONEq(t, `{"object":"list","has_more":true,"data":[{"object":"request","id":"req_full","api_key":"key_abc","method":"POST",
		"route":"POST /v1/orders","status":409,"code":"idempotency_key_in_use","idempotency_key":"order-7","replayed":true,
		"version":"v2","latency_ms":3,"created":1767225661}]}`, w.Body.String())

	w = get(h, "/v1/requests", "live:lic_nobody")
	require.JSONEq(t, `{"object":"list","has_more":false,"data":[]}`, w.Body.String(), "an empty list, not null")

	r := httptest.NewRequest(http.MethodHead, "/v1/requests/req_full", nil)
	r.Header.Set("X-Caller", "live:lic_a")
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	require.Equal(t, http.StatusOK, w.Code)
	require.Empty(t, w.Body.String())
	require.NotEmpty(t, w.Header().Get("Content-Length"))
}

func TestReadAPIPagesAndFilters(t *testing.T) {
	var entries []requestlog.Entry
	at := time.Unix(1767225600, 0).UTC()
	for i := range 30 {
		entries = append(entries, requestlog.Entry{RequestID: fmt.Sprintf("req_%02d", i), Owner: "live:lic_a",
			KeyID: fmt.Sprintf("key_%d", i%3), Method: "GET", Route: []string{"GET /v1/orders", "POST /v1/orders"}[i%2],
			Status: []int{200, 404, 422}[i%3], Code: []string{"", "order_not_found", "amount_over_limit"}[i%3],
			At: at.Add(time.Duration(i) * time.Second)})
	}
	other := entries[0]
	other.Owner, other.RequestID = "live:lic_b", "req_other"
	h, _ := readAPI(t, append(entries, other)...)

	ids := func(w *httptest.ResponseRecorder) ([]string, bool) {
		t.Helper()
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
		v := decode(t, w)
		var out []string
		for _, d := range v["data"].([]any) {
			out = append(out, d.(map[string]any)["id"].(string))
		}
		return out, v["has_more"].(bool)
	}
	// Every page, by starting_after: every entry once, newest first.
	var all []string
	target := "/v1/requests?limit=7"
	for {
		page, more := ids(get(h, target, "live:lic_a"))
		all = append(all, page...)
		if !more {
			break
		}
		target = "/v1/requests?limit=7&starting_after=" + page[len(page)-1]
	}
	require.Len(t, all, 30)
	require.Equal(t, "req_29", all[0])
	require.Equal(t, "req_00", all[29])
	require.NotContains(t, all, "req_other")

	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"status=404", []string{"req_28", "req_25", "req_22"}},
		{"status=4xx", []string{"req_29", "req_28", "req_26"}},
		{"status=2xx&route=POST+/v1/orders", []string{"req_27", "req_21", "req_15"}},
		{"code=amount_over_limit", []string{"req_29", "req_26", "req_23"}},
		{"api_key=key_1", []string{"req_28", "req_25", "req_22"}},
		{"since=1767225627", []string{"req_29", "req_28", "req_27"}},
		{"until=1767225602", []string{"req_01", "req_00"}},
		{"since=1767225610&until=1767225612", []string{"req_11", "req_10"}},
		{"status=404&starting_after=req_24", []string{"req_22", "req_19", "req_16"}},
		{"starting_after=req_gone", nil},
		{"status=301", nil},
		{"ignored=1&limit=", []string{"req_29", "req_28", "req_27"}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			q := tc.query
			if vals, _ := url.ParseQuery(q); !vals.Has("limit") {
				q += "&limit=3"
			}
			got, _ := ids(get(h, "/v1/requests?"+q, "live:lic_a"))
			got = got[:min(3, len(got))] // "limit=" is the default, 20
			if len(got) == 0 {
				got = nil
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestReadAPIRefusals(t *testing.T) {
	h, _ := readAPI(t, requestlog.Entry{RequestID: "req_1", Owner: "live:lic_a", Method: "GET", Status: 200, At: t0})
	for _, tc := range []struct {
		query string
		want  []apierror.Violation // name and code of each
	}{
		{"limit=0", []apierror.Violation{{Name: "limit", Code: "out_of_range"}}},
		{"limit=101", []apierror.Violation{{Name: "limit", Code: "out_of_range"}}},
		{"limit=99999999999999999999", []apierror.Violation{{Name: "limit", Code: "out_of_range"}}},
		{"limit=ten", []apierror.Violation{{Name: "limit", Code: "not_an_integer"}}},
		{"limit=1&limit=2", []apierror.Violation{{Name: "limit", Code: "query_repeated"}}},
		{"status=4x", []apierror.Violation{{Name: "status", Code: "invalid_value"}}},
		{"status=600", []apierror.Violation{{Name: "status", Code: "invalid_value"}}},
		{"status=6xx", []apierror.Violation{{Name: "status", Code: "invalid_value"}}},
		{"status=+404", []apierror.Violation{{Name: "status", Code: "invalid_value"}}},
		{"code=Not%20a%20code", []apierror.Violation{{Name: "code", Code: "invalid_value"}}},
		{"api_key=sk_live_" + strings.Repeat("a", 40), []apierror.Violation{{Name: "api_key", Code: "invalid_value"}}},
		{"route=" + strings.Repeat("a", 300), []apierror.Violation{{Name: "route", Code: "invalid_value"}}},
		{"route=GET%0A/x", []apierror.Violation{{Name: "route", Code: "invalid_value"}}},
		{"since=yesterday", []apierror.Violation{{Name: "since", Code: "not_an_integer"}}},
		{"since=-5", []apierror.Violation{{Name: "since", Code: "out_of_range"}}},
		{"since=20&until=10", []apierror.Violation{{Name: "until", Code: "range_inverted"}}},
		{"since=20&until=20", []apierror.Violation{{Name: "until", Code: "range_inverted"}}},
		{"starting_after=req%20x", []apierror.Violation{{Name: "starting_after", Code: "invalid_cursor"}}},
		{"starting_after=" + strings.Repeat("a", 129), []apierror.Violation{{Name: "starting_after", Code: "invalid_cursor"}}},
		{"limit=0&status=999&until=x", []apierror.Violation{{Name: "limit", Code: "out_of_range"}, {Name: "status", Code: "invalid_value"},
			{Name: "until", Code: "not_an_integer"}}},
		{"limit=%zz", []apierror.Violation{{Name: "limit", Code: apierror.CodeQueryMalformed}}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			w := get(h, "/v1/requests?"+tc.query, "live:lic_a")
			require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
			p, err := apierror.Parse(w.Result())
			require.NoError(t, err)
			var got []apierror.Violation
			for _, v := range p.Errors {
				require.Equal(t, apierror.LocationQuery, v.Location)
				require.NotEmpty(t, v.Detail)
				got = append(got, apierror.Violation{Name: v.Name, Code: v.Code})
			}
			require.Equal(t, tc.want, got)
			require.NotContains(t, w.Body.String(), "sk_live_", "a value is never echoed")
		})
	}

	// The caller's error is the answer; a caller of "" reads nothing.
	w := get(h, "/v1/requests/req_1", "error")
	require.Equal(t, http.StatusUnauthorized, w.Code)
	w = get(h, "/v1/requests", "error")
	require.Equal(t, http.StatusUnauthorized, w.Code)
	w = get(h, "/v1/requests/req_1", "")
	require.Equal(t, http.StatusNotFound, w.Code)
	w = get(h, "/v1/requests", "")
	require.JSONEq(t, `{"object":"list","has_more":false,"data":[]}`, w.Body.String())
	w = get(h, "/v1/requests/"+strings.Repeat("r", 200), "live:lic_a")
	require.Equal(t, http.StatusNotFound, w.Code)

	// A method other than GET and HEAD, when the handler is mounted without one.
	r := httptest.NewRequest(http.MethodPost, "/requests", nil)
	w = httptest.NewRecorder()
	must(requestlog.NewRequestsHandler(must(requestlog.NewMemoryStore(nil)), apikey.RequestScope, nil)).ServeHTTP(w, r)
	require.Equal(t, http.StatusMethodNotAllowed, w.Code)
	require.Equal(t, "GET, HEAD", w.Header().Get("Allow"))
}

// Whatever the query, the list answers a list or a 400 located at a query parameter, never anything
// else, and never echoes a value shaped like a credential.
func FuzzListQuery(f *testing.F) {
	for _, q := range []string{"", "limit=5", "status=4xx&code=x_y", "since=1&until=2", "starting_after=req_1&limit=100",
		"limit=%zz", "status=404;code=x", "api_key=key_1&route=GET+/v1/x", "route=sk_live_" + strings.Repeat("a", 40)} {
		f.Add(q)
	}
	h, _ := readAPI(f, requestlog.Entry{RequestID: "req_1", Owner: "o", Method: "GET", Status: 200, At: t0})
	f.Fuzz(func(t *testing.T, query string) {
		r := httptest.NewRequest(http.MethodGet, "/v1/requests", nil)
		r.URL.RawQuery = query
		r.Header.Set("X-Caller", "o")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		switch w.Code {
		case http.StatusOK:
			require.Equal(t, "list", decode(t, w)["object"])
		case http.StatusBadRequest:
			p, err := apierror.Parse(w.Result())
			require.NoError(t, err)
			require.NotEmpty(t, p.Errors)
			for _, v := range p.Errors {
				require.Equal(t, apierror.LocationQuery, v.Location)
			}
			if dec, err := url.QueryUnescape(query); err == nil && apierror.LooksLikeCredential(dec) {
				require.False(t, apierror.LooksLikeCredential(w.Body.String()), w.Body.String())
			}
		default:
			t.Fatalf("status %d for %q: %s", w.Code, query, w.Body.String())
		}
	})
}
