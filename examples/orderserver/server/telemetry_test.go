package server

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/otelconv"
)

// scrape renders the Prometheus text of reg and returns the number of series of each metric family
// and the size of the text.
func scrape(t testing.TB, reg *prometheus.Registry) (map[string]int, int) {
	t.Helper()
	w := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, w.Code)
	series := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(w.Body.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		series[name]++
	}
	require.NoError(t, sc.Err())
	return series, w.Body.Len()
}

// Issue 30: 2,100 unauthenticated requests with distinct Host headers minted 1,999 server.address
// series (otelhttp's defaults) and the scrape grew to 40 MB. Through the library's HTTPHandler, the
// reference server's series stay as a warm-up left them, with and without a key, whatever Host, port,
// user agent or unmatched path the clients send; and no span carries the key pasted into a path.
func TestClientsMintNoSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	require.NoError(t, err)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })
	tel, err := otelconv.New(&otelconv.Options{MeterProvider: mp, TracerProvider: tp, EventTypes: EventTypes})
	require.NoError(t, err)
	s, err := New(Config{Now: func() time.Time { return time.Unix(1767225600, 0) }, Telemetry: tel,
		Webhooks: WebhookOptions{SandboxGuard: loopbackGuard()}})
	require.NoError(t, err)
	c, err := s.IssueCredentials(context.Background(), apikey.Sandbox)
	require.NoError(t, err)
	live, err := s.IssueCredentials(context.Background(), apikey.Live)
	require.NoError(t, err)

	send := func(i int, path, key string) int {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		if i > 0 {
			r.Host = "h" + strconv.Itoa(i) + ".example:" + strconv.Itoa(1024+i)
			r.Header.Set("User-Agent", "agent/"+strconv.Itoa(i))
		}
		if key != "" {
			r.Header.Set("Authorization", "Bearer "+key)
		}
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		return w.Code
	}
	kinds := []struct{ path, key string }{
		{"/v1/orders/ord_%d", ""}, {"/v1/nope/%d", ""},
		{"/v1/orders/ord_%d", c.APIKey}, {"/v1/nope/%d", c.APIKey},
		{"/v1/orders/ord_%d", live.APIKey}, {"/v1/nope/%d", live.APIKey},
	}
	path := func(p string, i int) string { return strings.Replace(p, "%d", strconv.Itoa(i), 1) }
	for _, k := range kinds {
		send(0, path(k.path, 0), k.key)
	}
	// The production key's rate limit answers 429 within the run: the warm-up meets it too, so that
	// only what the clients send differs afterwards.
	for i := 0; send(0, "/v1/nope/0", live.APIKey) != http.StatusTooManyRequests; i++ {
		require.Less(t, i, 10000, "the production rate limit never answered 429")
	}
	before, beforeBytes := scrape(t, reg)
	for _, k := range kinds {
		for i := 1; i <= 2100; i++ {
			send(i, path(k.path, i), k.key)
		}
	}
	after, afterBytes := scrape(t, reg)
	t.Logf("scrape: %d bytes after the warm-up, %d after 2,100 requests per kind with distinct hosts", beforeBytes, afterBytes)
	total := 0
	for name, n := range after {
		total += n
		require.Equal(t, before[name], n, "%s: series minted by client input", name)
	}
	t.Logf("series: %d", total)

	// A key pasted into a path reaches no span.
	secret := "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
	send(1, "/v1/orders/"+secret, c.APIKey)
	for _, sp := range spans.Ended() {
		require.NotContains(t, sp.Name(), secret)
		for _, kv := range sp.Attributes() {
			require.False(t, apierror.LooksLikeCredential(kv.Value.String()), "span %s: %s=%s", sp.Name(), kv.Key, kv.Value.String())
		}
		for _, ev := range sp.Events() {
			for _, kv := range ev.Attributes {
				require.False(t, apierror.LooksLikeCredential(kv.Value.String()), "span %s event %s: %s", sp.Name(), ev.Name, kv.Key)
			}
		}
	}
}
