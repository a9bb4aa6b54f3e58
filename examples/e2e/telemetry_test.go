package e2e

import (
	"bufio"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace endpoint that keeps the spans it is sent.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	o := &otlpReceiver{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(raw, &req)
		}
		if r.URL.Path != "/v1/traces" || err != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		o.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				o.spans = append(o.spans, ss.Spans...)
			}
		}
		o.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(nil)
	}))
	t.Cleanup(o.Close)
	return o
}

// named returns the received spans called name.
func (o *otlpReceiver) named(name string) []*tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range o.spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// scrape reads a Prometheus text page into "name{labels}" → value, labels as the exporter wrote
// them.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out[line[:i]] = v
	}
	require.NoError(t, sc.Err())
	return out
}

// metric sums the series of name whose labels include every one of labels (`k="v"`).
func metric(series map[string]float64, name string, labels ...string) float64 {
	var sum float64
	for k, v := range series {
		n, rest, _ := strings.Cut(k, "{")
		if n != name {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(rest, l)
		}
		if ok {
			sum += v
		}
	}
	return sum
}

// TestTelemetryFlags: -metrics-addr serves the conventions' metrics as Prometheus text, and -otlp
// sends the spans of every request, the idempotency decision's among them, flushed at shutdown.
func TestTelemetryFlags(t *testing.T) {
	otlp := newOTLPReceiver(t)
	srv := startOrderServer(t, "orderserver", "-metrics-addr", "127.0.0.1:0", "-otlp", otlp.URL+"/v1/traces")
	metricsURL := srv.stdoutValue(t, "metrics on ")
	require.True(t, strings.HasPrefix(metricsURL, "http://127.0.0.1:"), metricsURL)

	key := newKey()
	for range 3 {
		r := request{Method: "POST", URL: srv.URL + "/v1/orders", Auth: bearer(srv.SandboxKey), Key: key, Body: orderBody}.do(t)
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	}
	r := request{Method: "POST", URL: srv.URL + "/v1/orders", Auth: bearer(srv.SandboxKey), Body: orderBody}.do(t)
	require.Equal(t, http.StatusBadRequest, r.Status)
	r = request{Method: "GET", URL: srv.URL + "/v99/orders/ord_x", Auth: bearer(srv.SandboxKey)}.do(t)
	require.Equal(t, http.StatusNotFound, r.Status)
	r = request{Method: "GET", URL: srv.URL + "/v1/orders/ord_x", Auth: "Bearer sk_sandbox_forged"}.do(t)
	require.Equal(t, http.StatusUnauthorized, r.Status)

	m := scrape(t, metricsURL)
	require.EqualValues(t, 1, metric(m, "svc_idempotency_requests_total", `svc_idempotency_outcome="executed"`))
	require.EqualValues(t, 2, metric(m, "svc_idempotency_requests_total", `svc_idempotency_outcome="replayed"`))
	require.EqualValues(t, 1, metric(m, "svc_idempotency_requests_total", `svc_idempotency_outcome="rejected"`))
	require.EqualValues(t, 3, metric(m, "svc_idempotency_store_duration_seconds_count", `svc_idempotency_store_operation="claim"`, `svc_idempotency_store_backend="memory"`))
	require.EqualValues(t, 1, metric(m, "svc_versioning_requests_total", `svc_versioning_version="unknown"`),
		"an unknown version is counted as unknown, never as the segment sent")
	require.EqualValues(t, 1, metric(m, "svc_apikey_authentications_total", `svc_apikey_auth_result="malformed"`))
	require.EqualValues(t, 1, metric(m, "svc_apierror_problems_total", `http_response_status_code="401"`))
	require.EqualValues(t, 1, metric(m, "svc_apierror_problems_total", `http_response_status_code="400"`, `svc_apierror_code="idempotency_key_missing"`))
	for k := range m {
		require.NotContains(t, k, "v99", "no client-chosen segment in any series")
		require.NotContains(t, k, key, "no idempotency key in any series")
		require.NotContains(t, k, srv.SandboxKey, "no credential in any series")
	}

	srv.stop(t) // flushes the batched spans
	claims := otlp.named("idempotency.claim")
	require.Len(t, claims, 3, "one claim span per keyed request")
	handlers := otlp.named("idempotency.handler")
	require.Len(t, handlers, 1, "the handler ran once")
	var servers []*tracepb.Span
	otlp.mu.Lock()
	for _, s := range otlp.spans {
		if s.Kind == tracepb.Span_SPAN_KIND_SERVER {
			servers = append(servers, s)
		}
	}
	otlp.mu.Unlock()
	require.GreaterOrEqual(t, len(servers), 4, "a server span per request")
	parent := false
	for _, s := range servers {
		parent = parent || string(s.SpanId) == string(handlers[0].ParentSpanId)
	}
	require.True(t, parent, "idempotency.handler is a child of the request's server span")
}
