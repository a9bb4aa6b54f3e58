package pgserver_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/examples/orderserver/server"
	"github.com/svcplatform/conventions/pgstore"
)

// TestRequestLogAcrossReplicas: Config keeps the request log in PostgreSQL (the table Migrate
// creates), so that a request served by one replica is found through the other's requests API,
// once the first has written it (within its flush interval, a second).
func TestRequestLogAcrossReplicas(t *testing.T) {
	_, a, b, creds := twoReplicas(t, func(cfg server.Config) { require.IsType(t, &pgstore.RequestLogStore{}, cfg.RequestLog) })
	do := func(s *server.Server, method, path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		r.Header.Set("Authorization", "Bearer "+creds.APIKey)
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		return w
	}
	missing := do(a, "GET", "/v1/orders/ord_nobody")
	require.Equal(t, http.StatusNotFound, missing.Code)
	id := missing.Header().Get("X-Request-Id")
	var found *httptest.ResponseRecorder
	waitFor(t, "replica B finds the request replica A served", func() bool {
		found = do(b, "GET", "/v1/requests/"+id)
		return found.Code == http.StatusOK
	})
	body := found.Body.String()
	for _, want := range []string{`"id":"` + id + `"`, `"route":"GET /v1/orders/{id}"`, `"status":404`, `"code":"order_not_found"`} {
		require.Contains(t, body, want)
	}
	require.NotContains(t, body, creds.APIKey)
}
