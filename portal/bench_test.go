package portal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/portal"
)

// cannedAPI answers the reads of the endpoints page as a full API would, from fixed JSON: n
// endpoints, each with a day of statistics, and a catalogue of three types. It measures the portal's
// own work — its in-process calls, decoding, the sparklines and the template — and not a store's.
func cannedAPI(n int) http.Handler {
	hourly := make([]map[string]any, 24)
	for i := range hourly {
		hourly[i] = map[string]any{"start": 1767225600 + int64(i-23)*3600, "attempts": 10, "delivered": 9, "failed": 1,
			"abandoned": 0, "success_rate": 0.9}
	}
	window := map[string]any{"attempts": 240, "delivered": 216, "failed": 24, "abandoned": 0, "success_rate": 0.9,
		"latency_ms": map[string]any{"p50": 40, "p99": 900}}
	stats, _ := json.Marshal(map[string]any{"object": "webhook_endpoint_stats", "status": "enabled",
		"backlog": map[string]any{"events": 3, "oldest_age": 12}, "hour": window, "day": window, "week": window, "hourly": hourly})
	eps := make([]map[string]any, n)
	for i := range eps {
		eps[i] = map[string]any{"id": fmt.Sprintf("we_%026d", i), "object": "webhook_endpoint", "url": fmt.Sprintf("https://hooks.example.com/%d", i),
			"api_version": "v1", "description": fmt.Sprintf("Consumer %d", i), "enabled_events": []string{"*"},
			"metadata": map[string]string{}, "headers": map[string]string{}, "status": "enabled", "created": 1767225600}
	}
	list, _ := json.Marshal(map[string]any{"object": "list", "data": eps, "has_more": false})
	types, _ := json.Marshal(map[string]any{"object": "list", "has_more": false, "data": []map[string]any{
		{"object": "event_type", "type": "order.created", "description": "An order was placed."},
		{"object": "event_type", "type": "order.cancelled", "description": "An order was cancelled."},
		{"object": "event_type", "type": "sandbox.test", "description": "A test event."}}})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/webhook_endpoints":
			_, _ = w.Write(list)
		case strings.HasSuffix(r.URL.Path, "/stats"):
			_, _ = w.Write(stats)
		case r.URL.Path == "/v1/event_types":
			_, _ = w.Write(types)
		default:
			http.NotFound(w, r)
		}
	})
}

// BenchmarkEndpointsPage serves the endpoints page of a licensee with 16 endpoints (the reference
// server's limit): 18 in-process API calls, 16 sparklines, one template.
func BenchmarkEndpointsPage(b *testing.B) {
	p, err := portal.New(&portal.Options{API: cannedAPI(16), BaseURL: "https://api.example.com/portal"})
	if err != nil {
		b.Fatal(err)
	}
	link, err := p.NewLink(context.Background(), portal.Session{Licensee: "lic_bench", Environment: apikey.Sandbox, Version: "v1"})
	if err != nil {
		b.Fatal(err)
	}
	u, _ := url.Parse(link.URL)
	login := httptest.NewRequest(http.MethodPost, "/portal/login", strings.NewReader(url.Values{"token": {u.Query().Get("token")}}.Encode()))
	login.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	login.Header.Set("Sec-Fetch-Site", "same-origin")
	w := httptest.NewRecorder()
	p.ServeHTTP(w, login)
	cookies := w.Result().Cookies()
	if w.Code != http.StatusSeeOther || len(cookies) != 1 {
		b.Fatalf("login: %d %v", w.Code, cookies)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodGet, "/portal/endpoints", nil)
		r.AddCookie(cookies[0])
		w := httptest.NewRecorder()
		p.ServeHTTP(w, r)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "Consumer 15") {
			b.Fatalf("page: %d", w.Code)
		}
	}
}
