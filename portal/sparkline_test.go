package portal_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// sparks returns the aria-label and title of each sparkline on p, and whether each draws a line.
func sparks(t *testing.T, p *page) [][3]string {
	t.Helper()
	re := regexp.MustCompile(`(?s)<svg class="spark" width="120" height="28" viewBox="0 0 120 28" role="img" aria-label="([^"]+)">\s*<title>([^<]+)</title>(.*?)</svg>`)
	var out [][3]string
	for _, m := range re.FindAllStringSubmatch(p.Body, -1) {
		require.Equal(t, m[1], m[2], "the title says what the label says")
		line := regexp.MustCompile(`<path d="([ML0-9. ]+)" class="spark-line"/>`).FindStringSubmatch(m[3])
		d := ""
		if line != nil {
			d = line[1]
		}
		out = append(out, [3]string{m[1], d})
	}
	return out
}

func TestSparklineOnPages(t *testing.T) {
	t.Run("the API's statistics", func(t *testing.T) {
		h := newHarness(t, nil)
		p := sandboxKey(licA)
		ep := h.register(p, nil)
		h.publish(ep.ID, "order.created", map[string]any{})
		h.deliver()
		b := h.login(p)
		for _, path := range []string{prefix + "/endpoints", endpointPath(ep.ID)} {
			got := sparks(t, b.get(path))
			require.Len(t, got, 1, path)
			require.NotEmpty(t, got[0][0], path)
		}
	})
	t.Run("an hourly series", func(t *testing.T) {
		// The member the portal draws from: a day of hours, oldest first. The wrapper adds it to the
		// API's statistics, which do not serve it (yet).
		hourly := make([]map[string]any, 24)
		for i := range hourly {
			hourly[i] = map[string]any{"start": time.Date(2026, 3, 1, 11+i, 0, 0, 0, time.UTC).Unix(), "attempts": 0, "delivered": 0,
				"success_rate": nil}
		}
		hourly[20] = map[string]any{"attempts": 4, "delivered": 3, "success_rate": 0.75}
		hourly[21] = map[string]any{"attempts": 2, "delivered": 2, "success_rate": 1.0}
		withHourly := func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasSuffix(r.URL.Path, "/stats") {
					next.ServeHTTP(w, r)
					return
				}
				rec := httptest.NewRecorder()
				next.ServeHTTP(rec, r)
				var st map[string]any
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &st))
				st["hourly"] = hourly
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(rec.Code)
				require.NoError(t, json.NewEncoder(w).Encode(st))
			})
		}
		h := newHarness(t, &options{wrapAPI: withHourly})
		p := sandboxKey(licA)
		ep := h.register(p, nil)
		b := h.login(p)
		for _, path := range []string{prefix + "/endpoints", endpointPath(ep.ID)} {
			got := sparks(t, b.get(path))
			require.Len(t, got, 1, path)
			require.Equal(t, "Success rate over the last 24 hours, hour by hour: 5 of 6 attempts delivered", got[0][0])
			require.Equal(t, "M102.9 8.0 L107.9 2.0", got[0][1])
		}
	})
}
