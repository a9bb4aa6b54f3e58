package otelconv

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
)

// httpService is a service wired as the reference server is: HTTPHandler outermost, then request
// IDs, the problem Writer, the real Authenticator, and a ServeMux whose routes are named by
// SetHTTPRoute.
func httpService(t testing.TB, h *harness, iss *apikey.Issuer) http.Handler {
	t.Helper()
	auth, err := apikey.NewAuthenticator(iss, &apikey.AuthenticatorOptions{Hooks: h.tel.APIKey()})
	if err != nil {
		t.Fatal(err)
	}
	problems := apierror.Writer{Hooks: h.tel.APIError()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/orders/{id}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		problems.Write(w, r, apierror.RouteNotFound())
	})
	named := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r)
		if r.Pattern != "" && r.Pattern != "/" {
			_, route, _ := strings.Cut(r.Pattern, " ")
			SetHTTPRoute(r.Context(), route)
		}
	})
	return h.tel.HTTPHandler(apierror.WithRequestID(problems.Handler(auth.Handler(named))))
}

// seriesPerInstrument counts the distinct attribute sets of every instrument.
func seriesPerInstrument(t testing.TB, h *harness) map[string]int {
	t.Helper()
	out := map[string]int{}
	for name, m := range h.collect(t) {
		out[name] = len(pointSets(m.Data))
	}
	return out
}

// Issue 30: 2,100 unauthenticated requests with distinct Host headers minted 1,999 server.address
// series through otelhttp's defaults. Through HTTPHandler, nothing a client sends mints a series, with
// or without a key: after a warm-up that takes every path once (found and not, with and without a key,
// a standard and an odd method), 2,100 requests per kind with distinct Host headers, ports, user
// agents, unmatched paths, X-Forwarded-For and order IDs leave every instrument's series count as it
// was.
func TestHTTPHandlerMintsNoSeriesFromClientInput(t *testing.T) {
	h := newHarness(t, nil)
	iss, err := apikey.NewIssuer(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httpService(t, h, iss)
	authz := "Bearer " + issueKey(t, iss, apikey.Sandbox)
	type kind struct {
		name, method, path string
		auth               bool
	}
	kinds := []kind{
		{"unauthenticated, found", http.MethodGet, "/v1/orders/ord_%d", false},
		{"unauthenticated, unmatched", http.MethodGet, "/v1/nope/%d", false},
		{"unauthenticated, odd method", "FETCH", "/v1/orders/ord_%d", false},
		{"authenticated, found", http.MethodGet, "/v1/orders/ord_%d", true},
		{"authenticated, unmatched", http.MethodGet, "/v1/nope/%d", true},
		{"authenticated, odd method", "FETCH", "/v1/nope/%d", true},
	}
	send := func(k kind, i int, authorization string) {
		r := httptest.NewRequest(k.method, fmt.Sprintf(k.path, i), nil)
		r.Host = "h" + strconv.Itoa(i) + ".example:" + strconv.Itoa(1024+i)
		r.Header.Set("User-Agent", "agent/"+strconv.Itoa(i))
		r.Header.Set("X-Forwarded-For", "10.0."+strconv.Itoa(i/250)+"."+strconv.Itoa(i%250))
		if k.auth {
			r.Header.Set("Authorization", authorization)
		}
		srv.ServeHTTP(httptest.NewRecorder(), r)
	}
	for _, k := range kinds {
		send(k, 0, authz)
	}
	before := seriesPerInstrument(t, h)
	if before[metricHTTPDuration] == 0 {
		t.Fatalf("no %s series after the warm-up: %v", metricHTTPDuration, before)
	}
	for _, k := range kinds {
		for i := 1; i <= 2100; i++ {
			send(k, i, authz)
		}
	}
	after := seriesPerInstrument(t, h)
	for name, n := range after {
		if n != before[name] {
			t.Errorf("%s: %d series after 2,100 requests per kind with distinct hosts, want %d as after the warm-up", name, n, before[name])
		}
	}
	t.Logf("series per instrument: %v", after)
	for _, set := range pointSets(h.collect(t)[metricHTTPDuration].Data) {
		for _, kv := range set.ToSlice() {
			switch kv.Key {
			case semconv.ServerAddressKey, semconv.ServerPortKey, semconv.UserAgentOriginalKey, semconv.URLPathKey, semconv.ClientAddressKey:
				t.Errorf("%s carries %s", metricHTTPDuration, kv.Key)
			}
		}
		if v, ok := set.Value(semconv.HTTPRouteKey); ok && v.AsString() != "/v1/orders/{id}" {
			t.Errorf("http.route %q is not a route of the service", v.AsString())
		}
	}
	if n, _ := h.histCount(t, metricHTTPDuration, semconv.HTTPRoute("/v1/orders/{id}"), attribute.Int("http.response.status_code", 200)); n != 2101 {
		t.Errorf("authenticated requests on the route: %d, want 2101", n)
	}
}
