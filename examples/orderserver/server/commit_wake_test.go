package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/examples/internal/testenv"
	"github.com/svcplatform/conventions/examples/orderserver/server"
	"github.com/svcplatform/conventions/examples/orderserver/server/pgserver"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/ssrf"
)

// TestEventsNumberedAfterTheRequestCommits: on PostgreSQL in transactional mode, an order's event is
// appended unnumbered inside the request's transaction, and the server wakes the dispatcher's
// sequencer once that transaction has committed — not before, when the sequencer could not see the
// event yet and would go back to sleep until its next poll. A request that appends nothing wakes
// nobody. (Here rather than in pgserver: it watches the server's wake-up, which only this
// directory's tests can replace.)
func TestEventsNumberedAfterTheRequestCommits(t *testing.T) {
	ctx := context.Background()
	pool, _ := testenv.PostgresPool(t)
	require.NoError(t, pgserver.Migrate(ctx, pool))
	cfg, err := pgserver.Config(pool, nil)
	require.NoError(t, err)
	cfg.Webhooks.SandboxGuard = &ssrf.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	srv, err := server.New(cfg)
	require.NoError(t, err)
	log := cfg.Store.Log().(*pgstore.EventLog)

	type wakeup struct{ pending, numbered int }
	var wakes []wakeup
	server.SetWake(srv, func() {
		// What a sequencer woken now would find: the event committed and waiting for its number.
		pending, err := log.Unsequenced(ctx)
		require.NoError(t, err)
		runs, err := log.Sequence(ctx, 100)
		require.NoError(t, err)
		n := 0
		for _, r := range runs {
			n += len(r.IDs)
		}
		wakes = append(wakes, wakeup{pending, n})
	})
	creds, err := srv.IssueCredentials(ctx, apikey.Sandbox)
	require.NoError(t, err)
	keys := 0
	post := func(path, body string, withKey bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+creds.APIKey)
		r.Header.Set("Content-Type", "application/json")
		if withKey {
			keys++
			r.Header.Set("Idempotency-Key", fmt.Sprintf("key-%d", keys))
		}
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, r)
		return w
	}

	w := post("/v1/webhook_endpoints", `{"url":"http://127.0.0.1:9/hook"}`, true)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	require.Empty(t, wakes, "registering an endpoint appends no event")

	w = post("/v1/orders", `{"account":"acc_1","side":"buy"}`, true)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	require.Equal(t, []wakeup{{pending: 1, numbered: 1}}, wakes, "woken once, after the commit")

	w = post("/v1/sandbox/events", `{"type":"sandbox.ping"}`, true)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	require.Len(t, wakes, 2)
	require.Equal(t, wakeup{pending: 1, numbered: 1}, wakes[1])
	require.NotContains(t, w.Body.String(), `"sequence"`, "the trigger answers before the event has its number")

	w = post("/v1/orders", `{"account":"acc_1","side":"buy"}`, false)
	require.Equal(t, http.StatusBadRequest, w.Code, "no Idempotency-Key: refused, nothing appended")
	require.Len(t, wakes, 2)
}
