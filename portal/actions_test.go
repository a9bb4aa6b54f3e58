package portal_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
)

// problemOf returns the problem the API answers to a request as p: the portal must show the same.
func (h *harness) problemOf(p apikey.Principal, method, path, body string) (title, detail string, violations map[string]string) {
	h.t.Helper()
	status, out := h.call(p, method, path, body)
	require.GreaterOrEqual(h.t, status, 400, "%s", out)
	var pr struct {
		Title, Detail string
		Errors        []struct {
			Pointer, Name, Detail string
		}
	}
	require.NoError(h.t, json.Unmarshal(out, &pr))
	violations = map[string]string{}
	for _, v := range pr.Errors {
		violations[v.Pointer+v.Name] = v.Detail
	}
	return pr.Title, pr.Detail, violations
}

// secretShown returns the signing secret a page shows, "" when it shows none.
func secretShown(p *page) string {
	m := regexp.MustCompile(`<input id="secret" type="text" readonly value="([^"]*)" data-copy>`).FindStringSubmatch(p.Body)
	if m == nil {
		return ""
	}
	return m[1]
}

func TestCreateEndpoint(t *testing.T) {
	h := newHarness(t, nil)
	p := sandboxKey(licA)
	b := h.login(p)
	shown := b.get(prefix + "/endpoints")
	require.Contains(t, shown.Body, "No endpoints yet")
	form := url.Values{"idempotency_key": {shown.formKey(prefix + "/endpoints")}, "url": {h.consumer.URL + "/orders"},
		"description": {"Orders"}, "event": {"order.created", "order.cancelled"}, "api_version": {"v2"},
		"headers": {"X-Tenant: t1\r\n\r\nX-Region:  eu \r\n"}}
	got := b.post(prefix+"/endpoints", form)
	require.Equal(t, http.StatusCreated, got.Status, got.Body)
	secret := secretShown(got)
	require.True(t, strings.HasPrefix(secret, "whsec_"), secret)
	require.Contains(t, got.Body, "Endpoint registered")
	require.Contains(t, got.Body, "It is shown <strong>this once</strong>")

	eps := h.list(p)
	require.Len(t, eps, 1)
	ep := eps[0]
	require.Equal(t, h.consumer.URL+"/orders", ep.URL)
	require.Equal(t, "Orders", ep.Description)
	require.Equal(t, []string{"order.created", "order.cancelled"}, ep.EnabledEvents)
	require.Equal(t, "v2", ep.APIVersion)
	require.Equal(t, map[string]string{"X-Tenant": "t1", "X-Region": "eu"}, ep.Headers)
	require.Contains(t, got.Body, `href="/portal/endpoints/`+ep.ID+`"`)

	// The secret is shown once: the endpoint's page never shows it.
	page := b.get(endpointPath(ep.ID))
	require.Equal(t, http.StatusOK, page.Status)
	require.NotContains(t, page.Body, secret)
	require.Empty(t, secretShown(page))
	// The secret is the one deliveries are signed with.
	h.publish(ep.ID, "order.created", map[string]any{"id": "ord_1"})
	h.deliver()
	require.Len(t, h.received(), 1)
	require.Contains(t, h.received()[0].Header.Get("X-SVC-Signature"), "v1=")
	require.Equal(t, "t1", h.received()[0].Header.Get("X-Tenant"))
	// The call carried the form's key.
	calls := h.callsTo(http.MethodPost, "/v1/webhook_endpoints")
	require.Len(t, calls, 1)
	require.Equal(t, form.Get("idempotency_key"), calls[0].Key)
}

func TestCreateRefused(t *testing.T) {
	h := newHarness(t, nil)
	p := sandboxKey(licA)
	b := h.login(p)
	t.Run("the API's refusal, next to the field", func(t *testing.T) {
		bad := "http://10.0.0.1/hooks"
		title, detail, violations := h.problemOf(p, http.MethodPost, "/v1/webhook_endpoints",
			`{"url":"`+bad+`","enabled_events":["*"]}`)
		require.NotEmpty(t, violations["/url"])
		shown := b.get(prefix + "/endpoints")
		got := b.post(prefix+"/endpoints", url.Values{"idempotency_key": {shown.formKey(prefix + "/endpoints")},
			"url": {bad}, "description": {"kept as typed"}, "event": {"order.created"}})
		require.Equal(t, http.StatusBadRequest, got.Status)
		require.Contains(t, got.Body, `<div class="problem" role="alert">`)
		require.Contains(t, got.Body, "<h2>"+text(title)+"</h2>")
		require.Contains(t, got.Body, "<p>"+text(detail)+"</p>")
		field := got.field("f-url")
		require.Contains(t, field, `aria-invalid="true" aria-describedby="e-url"`)
		require.Contains(t, field, `<div id="e-url"><p class="field-error">`+text(violations["/url"])+`</p></div>`)
		require.Contains(t, field, `value="`+bad+`"`, "the form keeps what was typed")
		require.Contains(t, got.field("f-description"), `value="kept as typed"`)
		require.NotContains(t, got.field("f-description"), "aria-invalid")
		require.Contains(t, got.Body, `value="order.created" checked`)
		require.NotContains(t, got.Body, `value="*" checked`)
		require.Empty(t, h.list(p))

		// The refusal released its key: the same form, corrected, registers.
		again := b.post(prefix+"/endpoints", url.Values{"idempotency_key": {shown.formKey(prefix + "/endpoints")},
			"url": {h.consumer.URL}, "event": {"*"}})
		require.Equal(t, http.StatusCreated, again.Status, again.Body)
		require.Len(t, h.list(p), 1)
	})
	t.Run("no event type ticked", func(t *testing.T) {
		got := b.post(prefix+"/endpoints", url.Values{"url": {h.consumer.URL}})
		require.Equal(t, http.StatusBadRequest, got.Status)
		events := got.element("fieldset", `<fieldset class="field"`, `<legend>Event types</legend>`)
		require.Contains(t, events, `aria-describedby="e-events"`)
		require.Contains(t, events, `<div id="e-events"><p class="field-error">must list at least one event type`)
	})
	t.Run("a violation deep in a member", func(t *testing.T) {
		got := b.post(prefix+"/endpoints", url.Values{"url": {h.consumer.URL}, "event": {"*"}, "headers": {"X-SVC-Sequence: 1"}})
		require.Equal(t, http.StatusBadRequest, got.Status)
		field := got.field("f-headers")
		require.Contains(t, field, `aria-invalid="true"`)
		require.Contains(t, field, `class="field-error"`)
		require.Contains(t, field, "X-SVC-Sequence: 1</textarea>")
	})
	t.Run("a malformed header line, before the API", func(t *testing.T) {
		before := len(h.callsTo(http.MethodPost, "/v1/webhook_endpoints"))
		got := b.post(prefix+"/endpoints", url.Values{"url": {h.consumer.URL}, "event": {"*"}, "headers": {"X-Ok: 1\nno colon here"}})
		require.Equal(t, http.StatusBadRequest, got.Status)
		require.Contains(t, got.field("f-headers"), "line 2 is not a header")
		require.Len(t, h.callsTo(http.MethodPost, "/v1/webhook_endpoints"), before, "nothing was sent")
	})
}

func TestCreateSameFormTwice(t *testing.T) {
	h := newHarness(t, nil)
	p := sandboxKey(licA)
	b := h.login(p)
	shown := b.get(prefix + "/endpoints")
	form := url.Values{"idempotency_key": {shown.formKey(prefix + "/endpoints")}, "url": {h.consumer.URL}, "event": {"*"}}
	first := b.post(prefix+"/endpoints", form)
	require.Equal(t, http.StatusCreated, first.Status, first.Body)
	require.NotEmpty(t, secretShown(first))
	second := b.post(prefix+"/endpoints", form) // a double click, a reload
	eps := h.list(p)
	require.Len(t, eps, 1, "one endpoint")
	// The second answer knows it was the same form: no secret (it was shown once), no failure.
	require.Empty(t, secretShown(second))
	require.Equal(t, http.StatusSeeOther, second.Status, second.Body)
	require.Equal(t, endpointPath(eps[0].ID)+"?done=created_again", second.Location())
	second = b.follow(second)
	require.Equal(t, http.StatusOK, second.Status, second.Body)
	require.Contains(t, second.Body, eps[0].ID)
	require.Contains(t, second.Body, "already registered")
	// A new form (a new key) is a new endpoint.
	fresh := b.get(prefix + "/endpoints").formKey(prefix + "/endpoints")
	require.NotEqual(t, form.Get("idempotency_key"), fresh)
	form.Set("idempotency_key", fresh)
	require.Equal(t, http.StatusCreated, b.post(prefix+"/endpoints", form).Status)
	require.Len(t, h.list(p), 2)
}

func TestUpdateEndpoint(t *testing.T) {
	h := newHarness(t, &options{apiVersions: func() []string { return []string{"v1", "v2"} }})
	p := sandboxKey(licA)
	ep := h.register(p, map[string]any{"description": "before", "enabled_events": []string{"order.created"},
		"headers": map[string]string{"X-Tenant": "a", "X-Other": "b"}, "metadata": map[string]string{"team": "ops"}})
	b := h.login(p)
	shown := b.get(endpointPath(ep.ID))
	require.Equal(t, http.StatusOK, shown.Status)
	// The edit form holds the endpoint as it is.
	require.Contains(t, shown.field("f-description"), `value="before"`)
	require.Contains(t, shown.Body, `value="order.created" checked`)
	require.Contains(t, shown.Body, "X-Other: b\nX-Tenant: a\n</textarea>")
	require.Contains(t, shown.Body, `<option value="v1" selected>v1</option>`)

	form := url.Values{"idempotency_key": {shown.formKey(endpointPath(ep.ID))}, "url": {ep.URL}, "description": {"after"},
		"event": {"order.cancelled", "sandbox.test"}, "api_version": {"v2"}, "headers": {"X-Other: c"}}
	got := b.post(endpointPath(ep.ID), form)
	require.Equal(t, http.StatusSeeOther, got.Status, got.Body)
	require.Equal(t, endpointPath(ep.ID)+"?done=updated", got.Location())
	page := b.follow(got)
	require.Contains(t, page.Body, `<p class="notice" role="status">The endpoint was updated.</p>`)
	require.Contains(t, page.Body, "<h1>after</h1>")
	require.Contains(t, page.Body, `<option value="v2" selected>v2</option>`)

	now, _ := h.get(p, ep.ID)
	require.Equal(t, "after", now.Description)
	require.Equal(t, []string{"order.cancelled", "sandbox.test"}, now.EnabledEvents)
	require.Equal(t, "v2", now.APIVersion)
	require.Equal(t, map[string]string{"X-Other": "c"}, now.Headers, "X-Tenant removed")
	require.Equal(t, map[string]string{"team": "ops"}, now.Metadata, "metadata the form does not show is left alone")
	// The removal was a merge patch's null.
	patches := h.callsTo(http.MethodPatch, "/v1/webhook_endpoints/"+ep.ID)
	require.Len(t, patches, 1)
	var body map[string]any
	require.NoError(t, json.Unmarshal(patches[0].Body, &body))
	require.Equal(t, map[string]any{"X-Other": "c", "X-Tenant": nil}, body["headers"])
	require.Equal(t, form.Get("idempotency_key"), patches[0].Key)

	t.Run("a header renamed in another case replaces it", func(t *testing.T) {
		shown := b.get(endpointPath(ep.ID))
		got := b.post(endpointPath(ep.ID), url.Values{"idempotency_key": {shown.formKey(endpointPath(ep.ID))}, "url": {ep.URL},
			"event": {"*"}, "headers": {"x-other: d"}})
		require.Equal(t, http.StatusSeeOther, got.Status, got.Body)
		now, _ := h.get(p, ep.ID)
		require.Len(t, now.Headers, 1)
		for _, v := range now.Headers {
			require.Equal(t, "d", v)
		}
		require.Equal(t, []string{"*"}, now.EnabledEvents)
		require.Empty(t, now.Description, "emptied")
	})
	t.Run("every header removed", func(t *testing.T) {
		shown := b.get(endpointPath(ep.ID))
		got := b.post(endpointPath(ep.ID), url.Values{"idempotency_key": {shown.formKey(endpointPath(ep.ID))}, "url": {ep.URL},
			"event": {"*"}, "headers": {""}})
		require.Equal(t, http.StatusSeeOther, got.Status, got.Body)
		now, _ := h.get(p, ep.ID)
		require.Empty(t, now.Headers)
	})
	t.Run("refused", func(t *testing.T) {
		shown := b.get(endpointPath(ep.ID))
		got := b.post(endpointPath(ep.ID), url.Values{"idempotency_key": {shown.formKey(endpointPath(ep.ID))}, "url": {"https://localhost/x"},
			"event": {"*"}, "api_version": {"v9"}})
		require.Equal(t, http.StatusBadRequest, got.Status, got.Body)
		require.Contains(t, got.field("f-url"), `class="field-error"`)
		require.Contains(t, got.field("f-version"), `class="field-error"`)
		require.Contains(t, got.field("f-url"), `value="https://localhost/x"`)
		// The problem is shown in the edit section, not in the page's header.
		edit := got.element("section", `<section class="card" aria-labelledby="edit">`, `<h2 id="edit">`)
		require.Contains(t, edit, `<div class="problem" role="alert">`)
		now, _ := h.get(p, ep.ID)
		require.Equal(t, ep.URL, now.URL)
	})
}

func TestEnableDisable(t *testing.T) {
	h := newHarness(t, nil)
	p := sandboxKey(licA)
	ep := h.register(p, nil)
	b := h.login(p)
	shown := b.get(endpointPath(ep.ID))
	require.Contains(t, shown.Body, `<span class="badge badge-enabled">enabled</span>`)
	require.Contains(t, shown.Body, "Disable endpoint")
	got := b.post(endpointPath(ep.ID, "/status"), url.Values{"idempotency_key": {shown.formKey(endpointPath(ep.ID, "/status"))},
		"status": {shown.hiddenIn(endpointPath(ep.ID, "/status"), "status")}})
	require.Equal(t, http.StatusSeeOther, got.Status, got.Body)
	page := b.follow(got)
	require.Contains(t, page.Body, `<span class="badge badge-disabled">disabled</span> <span class="meta">(manual)</span>`)
	require.Contains(t, page.Body, "The endpoint is disabled")
	require.Contains(t, page.Body, "Enable endpoint")
	now, _ := h.get(p, ep.ID)
	require.Equal(t, "disabled", now.Status)
	list := b.get(prefix + "/endpoints")
	require.Contains(t, list.Body, `<span class="badge badge-disabled">disabled</span>`)

	got = b.post(endpointPath(ep.ID, "/status"), url.Values{"idempotency_key": {page.formKey(endpointPath(ep.ID, "/status"))},
		"status": {page.hiddenIn(endpointPath(ep.ID, "/status"), "status")}})
	require.Equal(t, http.StatusSeeOther, got.Status, got.Body)
	page = b.follow(got)
	require.Contains(t, page.Body, `<span class="badge badge-enabled">enabled</span>`)
	require.Contains(t, page.Body, "The endpoint is enabled")
	now, _ = h.get(p, ep.ID)
	require.Equal(t, "enabled", now.Status)

	t.Run("a status the API refuses", func(t *testing.T) {
		got := b.post(endpointPath(ep.ID, "/status"), url.Values{"status": {"paused"}})
		require.Equal(t, http.StatusBadRequest, got.Status, got.Body)
		manage := got.element("section", `<section class="card" aria-labelledby="manage">`, `<h2 id="manage">`)
		require.Contains(t, manage, `<div class="problem" role="alert">`)
		require.NotContains(t, got.Body, `<p class="notice"`)
	})
}

func TestDeleteEndpoint(t *testing.T) {
	h := newHarness(t, nil)
	p := sandboxKey(licA)
	ep := h.register(p, map[string]any{"description": "doomed"})
	kept := h.register(p, map[string]any{"description": "kept"})
	b := h.login(p)
	confirm := b.get(endpointPath(ep.ID, "/delete"))
	require.Equal(t, http.StatusOK, confirm.Status)
	require.Contains(t, confirm.Body, "Delete this endpoint?")
	require.Contains(t, confirm.Body, `<button type="submit" class="danger">Delete endpoint</button>`)
	require.Contains(t, confirm.Body, `<a class="button" href="/portal/endpoints/`+ep.ID+`">Keep it</a>`)
	_, alive := h.get(p, ep.ID)
	require.True(t, alive, "the confirmation page deletes nothing")

	got := b.post(endpointPath(ep.ID, "/delete"), url.Values{"idempotency_key": {confirm.formKey(endpointPath(ep.ID, "/delete"))}})
	require.Equal(t, http.StatusSeeOther, got.Status, got.Body)
	require.Equal(t, prefix+"/endpoints?done=deleted", got.Location())
	list := b.follow(got)
	require.Contains(t, list.Body, "The endpoint was deleted.")
	require.NotContains(t, list.Body, ep.ID)
	require.Contains(t, list.Body, kept.ID)
	_, alive = h.get(p, ep.ID)
	require.False(t, alive)
	gone := b.get(endpointPath(ep.ID))
	require.Equal(t, http.StatusNotFound, gone.Status)

	// The same confirmation sent again acts once, and says nothing went wrong.
	again := b.post(endpointPath(ep.ID, "/delete"), url.Values{"idempotency_key": {confirm.formKey(endpointPath(ep.ID, "/delete"))}})
	require.Equal(t, http.StatusSeeOther, again.Status, again.Body)
	require.Len(t, h.callsTo(http.MethodDelete, "/v1/webhook_endpoints/"), 2)
	require.Len(t, h.list(p), 1)
}

func TestRollSecret(t *testing.T) {
	h := newHarness(t, nil)
	p := sandboxKey(licA)
	ep := h.register(p, nil)
	b := h.login(p)
	shown := b.get(endpointPath(ep.ID))
	require.Contains(t, shown.Body, `<option value="86400" selected>24 hours</option>`)
	form := url.Values{"idempotency_key": {shown.formKey(endpointPath(ep.ID, "/roll"))}, "expires_in": {"3600"}}
	got := b.post(endpointPath(ep.ID, "/roll"), form)
	require.Equal(t, http.StatusOK, got.Status, got.Body)
	secret := secretShown(got)
	require.True(t, strings.HasPrefix(secret, "whsec_"), got.Body)
	require.NotEqual(t, ep.Secret, secret)
	require.Contains(t, got.Body, "New signing secret")
	until := t0.Add(time.Hour).UTC().Format("2006-01-02 15:04:05 UTC")
	require.Contains(t, got.Body, "The previous secret keeps signing too until <strong>"+until+"</strong>")
	now, _ := h.get(p, ep.ID)
	require.NotNil(t, now.PreviousSecretExpiresAt)
	require.Equal(t, t0.Add(time.Hour).Unix(), *now.PreviousSecretExpiresAt)
	page := b.get(endpointPath(ep.ID))
	require.Contains(t, page.Body, "signs too until "+until)
	require.NotContains(t, page.Body, secret)

	// The same form again: the API replays the roll, which it did once; no secret is shown.
	again := b.post(endpointPath(ep.ID, "/roll"), form)
	require.Empty(t, secretShown(again))
	require.Equal(t, http.StatusSeeOther, again.Status, again.Body)
	require.Equal(t, endpointPath(ep.ID)+"?done=rolled_again", again.Location())
	again = b.follow(again)
	require.Equal(t, http.StatusOK, again.Status, again.Body)
	require.Contains(t, again.Body, "The secret was already rolled by this form")
	// Rolled once: the API saw the key twice, its answer did not move, and the registry holds the
	// new secret and the original (a second roll would have dropped the original).
	rolls := h.callsTo(http.MethodPost, "/roll_secret")
	require.Len(t, rolls, 2)
	require.Equal(t, rolls[0].Key, rolls[1].Key)
	now, _ = h.get(p, ep.ID)
	require.Equal(t, t0.Add(time.Hour).Unix(), *now.PreviousSecretExpiresAt)
	stored, err := h.eps.Lookup(t.Context(), ep.ID)
	require.NoError(t, err)
	require.Equal(t, []string{secret, ep.Secret}, stored.Secrets)

	t.Run("a number that is not one", func(t *testing.T) {
		got := b.post(endpointPath(ep.ID, "/roll"), url.Values{"expires_in": {"soon"}})
		require.Equal(t, http.StatusBadRequest, got.Status)
		require.Contains(t, got.Body, "must be a number of seconds")
		require.Empty(t, secretShown(got))
	})
	t.Run("a number the API refuses", func(t *testing.T) {
		got := b.post(endpointPath(ep.ID, "/roll"), url.Values{"expires_in": {"99999999"}})
		require.Equal(t, http.StatusBadRequest, got.Status)
		manage := got.element("section", `<section class="card" aria-labelledby="manage">`, `<h2 id="manage">`)
		require.Contains(t, manage, `<p class="field-error">must be between 0`)
		stored, err := h.eps.Lookup(t.Context(), ep.ID)
		require.NoError(t, err)
		require.Equal(t, secret, stored.Secrets[0])
	})
}

// TestEachFormItsOwnKey: the forms of one page carry different Idempotency-Keys, so that sending one
// form of a page the browser brought back (Back, after another of its forms was sent) is a request
// of its own, not a reuse of the other's key.
func TestEachFormItsOwnKey(t *testing.T) {
	h := newHarness(t, nil)
	p := sandboxKey(licA)
	ep := h.register(p, nil)
	b := h.login(p)
	shown := b.get(endpointPath(ep.ID))
	keys := map[string]string{}
	for _, action := range []string{endpointPath(ep.ID), endpointPath(ep.ID, "/status"), endpointPath(ep.ID, "/roll"),
		endpointPath(ep.ID, "/test_event"), endpointPath(ep.ID, "/faults")} {
		k := shown.formKey(action)
		require.NotContains(t, keys, k, "the form to %s has the key of the form to %s", action, keys[k])
		keys[k] = action
	}
	// Both sent from that one page: each acts.
	got := b.post(endpointPath(ep.ID, "/test_event"), url.Values{"idempotency_key": {shown.formKey(endpointPath(ep.ID, "/test_event"))}})
	require.Equal(t, http.StatusSeeOther, got.Status, got.Body)
	got = b.post(endpointPath(ep.ID, "/status"), url.Values{"idempotency_key": {shown.formKey(endpointPath(ep.ID, "/status"))},
		"status": {"disabled"}})
	require.Equal(t, http.StatusSeeOther, got.Status, got.Body)
	now, _ := h.get(p, ep.ID)
	require.Equal(t, "disabled", now.Status)
}
