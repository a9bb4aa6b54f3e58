package portal_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook/producer"
)

// snapshot is what a test checks did not change: an endpoint as stored, its stream, its faults and
// what the consumer received.
type snapshot struct {
	ep       producer.Endpoint
	events   int
	faults   bool
	received int
}

func (h *harness) snapshot(id string) snapshot {
	h.t.Helper()
	h.deliver() // whatever an action queued goes out, so that received counts it
	ep, err := h.eps.Lookup(h.t.Context(), id)
	require.NoError(h.t, err)
	evs, _, err := h.log.Range(h.t.Context(), id, 1, 1000, 1000)
	require.NoError(h.t, err)
	return snapshot{ep: ep, events: len(evs), faults: !h.faults.FaultsFor(id).IsZero(), received: len(h.received())}
}

// forged is every form of an endpoint's pages, posted as a visitor could forge it.
func forged(id string) []struct {
	path string
	form url.Values
} {
	return []struct {
		path string
		form url.Values
	}{
		{endpointPath(id), url.Values{"url": {"https://attacker.example.com/x"}, "event": {"*"}, "headers": {"X-Stolen: 1"}}},
		{endpointPath(id, "/status"), url.Values{"status": {"disabled"}}},
		{endpointPath(id, "/roll"), url.Values{"expires_in": {"0"}}},
		{endpointPath(id, "/events/1/resend"), url.Values{}},
		{endpointPath(id, "/recover"), url.Values{"from": {"1"}, "to": {"1"}}},
		{endpointPath(id, "/faults"), url.Values{"action": {"set"}, "drop": {"1"}}},
		{endpointPath(id, "/faults"), url.Values{"action": {"clear"}}},
		{endpointPath(id, "/test_event"), url.Values{"type": {"order.created"}}},
		{endpointPath(id, "/delete"), url.Values{}},
	}
}

func TestTenancy(t *testing.T) {
	h := newHarness(t, nil)
	a, bKey := sandboxKey(licA), sandboxKey(licB)
	epA := h.register(a, map[string]any{"description": "A's secret project", "url": h.consumer.URL + "/a-only",
		"headers": map[string]string{"X-A": "a"}})
	h.publish(epA.ID, "order.created", map[string]any{"id": "ord_a"})
	h.deliver()
	epB := h.register(bKey, map[string]any{"description": "B's endpoint"})
	before := h.snapshot(epA.ID)

	b := h.login(bKey)
	list := b.get(prefix + "/endpoints")
	require.Equal(t, http.StatusOK, list.Status)
	require.Contains(t, list.Body, epB.ID)
	require.NotContains(t, list.Body, epA.ID)
	require.NotContains(t, list.Body, "A&#39;s secret project")
	require.NotContains(t, list.Body, "/a-only")

	for _, path := range []string{endpointPath(epA.ID), endpointPath(epA.ID, "/deliveries"), endpointPath(epA.ID, "/events/1"),
		endpointPath(epA.ID, "/recover"), endpointPath(epA.ID, "/delete")} {
		got := b.get(path)
		require.Equal(t, http.StatusNotFound, got.Status, path)
		require.Contains(t, got.Body, `<section class="card narrow">`, "the message page: %s", path)
		require.NotContains(t, got.Body, "secret project", path)
		require.NotContains(t, got.Body, "/a-only", path)
	}
	for _, f := range forged(epA.ID) {
		got := b.post(f.path, f.form)
		require.Equal(t, http.StatusNotFound, got.Status, "%s %v: %s", f.path, f.form, got.Body)
		require.NotContains(t, got.Body, "secret project", f.path)
	}
	require.Equal(t, before, h.snapshot(epA.ID), "nothing of A's changed")
	// And A's own session still sees it all.
	require.Contains(t, h.login(a).get(prefix+"/endpoints").Body, epA.ID)

	t.Run("sandbox and production apart", func(t *testing.T) {
		live := h.login(liveKey(licA))
		got := live.get(prefix + "/endpoints")
		require.Equal(t, http.StatusOK, got.Status)
		require.NotContains(t, got.Body, epA.ID)
		require.Contains(t, got.Body, `<span class="env env-live">Production</span>`)
		require.Equal(t, http.StatusNotFound, live.get(endpointPath(epA.ID)).Status)
	})
}

func TestProductionHasNoSandboxTools(t *testing.T) {
	h := newHarness(t, nil)
	p := liveKey(licA)
	ep := h.register(p, nil)
	h.publish(ep.ID, "order.created", map[string]any{"id": "ord_1"})
	before := h.snapshot(ep.ID)
	b := h.login(p)
	page := b.get(endpointPath(ep.ID))
	require.Equal(t, http.StatusOK, page.Status)
	require.Contains(t, page.Body, `<span class="env env-live">Production</span>`)
	require.NotContains(t, page.Body, "Sandbox tools")
	require.False(t, page.hasForm(endpointPath(ep.ID, "/faults")))
	require.False(t, page.hasForm(endpointPath(ep.ID, "/test_event")))
	require.True(t, page.hasForm(endpointPath(ep.ID, "/roll")), "the rest is there")

	for _, f := range forged(ep.ID) {
		if f.path != endpointPath(ep.ID, "/faults") && f.path != endpointPath(ep.ID, "/test_event") {
			continue
		}
		got := b.post(f.path, f.form)
		require.Equal(t, http.StatusNotFound, got.Status, "%s: the sandbox routes do not exist for a live key", f.path)
	}
	require.Equal(t, before, h.snapshot(ep.ID))
	require.Empty(t, h.setFault)
}

func TestRestrictedKey(t *testing.T) {
	h := newHarness(t, nil)
	full := sandboxKey(licA)
	ep := h.register(full, map[string]any{"description": "read only here"})
	h.publish(ep.ID, "order.created", map[string]any{"id": "ord_1"})
	h.deliver()
	before := h.snapshot(ep.ID)

	restricted := full
	restricted.KeyID = "key_restricted"
	restricted.Permissions = []string{"webhook_endpoints:read", "events:read"}
	b := h.login(restricted)

	list := b.get(prefix + "/endpoints")
	require.Equal(t, http.StatusOK, list.Status, list.Body)
	require.Contains(t, list.Body, ep.ID)
	require.NotContains(t, list.Body, "Add an endpoint")
	require.False(t, list.hasForm(prefix+"/endpoints"))

	page := b.get(endpointPath(ep.ID))
	require.Equal(t, http.StatusOK, page.Status)
	for _, f := range forged(ep.ID) {
		require.False(t, page.hasForm(f.path), "no form to %s", f.path)
	}
	require.NotContains(t, page.Body, "Recover a range")
	require.NotContains(t, page.Body, "Delete endpoint")
	event := b.get(endpointPath(ep.ID, "/events/1"))
	require.Equal(t, http.StatusOK, event.Status)
	require.False(t, event.hasForm(endpointPath(ep.ID, "/events/1/resend")))
	require.Equal(t, http.StatusOK, b.get(endpointPath(ep.ID, "/deliveries")).Status)

	forms := append(forged(ep.ID), struct {
		path string
		form url.Values
	}{prefix + "/endpoints", url.Values{"url": {h.consumer.URL}, "event": {"*"}}})
	for _, f := range forms {
		got := b.post(f.path, f.form)
		require.Equal(t, http.StatusForbidden, got.Status, "%s: %s", f.path, got.Body)
		require.Contains(t, got.Body, "this API key lacks the permission", "%s: the API's reason is shown", f.path)
	}
	require.Equal(t, before, h.snapshot(ep.ID), "nothing changed")
	require.Len(t, h.list(full), 1)

	t.Run("less still", func(t *testing.T) {
		restricted.Permissions = []string{"webhook_endpoints:read"}
		b := h.login(restricted)
		require.Equal(t, http.StatusOK, b.get(endpointPath(ep.ID)).Status)
		got := b.get(endpointPath(ep.ID, "/deliveries"))
		require.Equal(t, http.StatusForbidden, got.Status)
		require.Contains(t, got.Body, "events:read")
	})
	t.Run("a key that may not read endpoints gets no link", func(t *testing.T) {
		restricted.Permissions = []string{"events:read"}
		status, _ := h.call(restricted, http.MethodPost, "/v1/portal_sessions", "")
		require.Equal(t, http.StatusForbidden, status)
	})
}
