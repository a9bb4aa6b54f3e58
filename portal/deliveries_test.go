package portal_test

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/sandbox"
)

// rows returns the attempts a deliveries page lists: "#sequence outcome" each, newest first.
func rows(p *page) []string {
	var out []string
	re := regexp.MustCompile(`(?s)<td data-label="Event"><a href="[^"]*">#(\d+)</a></td>.*?<span class="badge badge-(\w+)">`)
	for _, m := range re.FindAllStringSubmatch(p.Body, -1) {
		out = append(out, "#"+m[1]+" "+m[2])
	}
	return out
}

// link returns the href of the page's link (an <a class="button">) labelled label, unescaped.
func link(p *page, label string) string {
	m := regexp.MustCompile(`<a class="button" href="([^"]*)">` + regexp.QuoteMeta(label) + `</a>`).FindStringSubmatch(p.Body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

func TestDeliveriesPage(t *testing.T) {
	h := newHarness(t, nil)
	p := sandboxKey(licA)
	ep := h.register(p, nil)
	for i := range 3 {
		h.publish(ep.ID, "order.created", map[string]any{"n": i})
	}
	h.answer(http.StatusServiceUnavailable, "down for maintenance")
	h.deliver() // event 1 fails; 2 and 3 wait behind it
	h.clock.Advance(time.Minute)
	h.answer(http.StatusOK, "thanks")
	h.deliver()
	b := h.login(p)

	all := b.get(endpointPath(ep.ID, "/deliveries"))
	require.Equal(t, http.StatusOK, all.Status, all.Body)
	require.Equal(t, []string{"#3 delivered", "#2 delivered", "#1 delivered", "#1 failed"}, rows(all))
	require.Contains(t, all.Body, `<pre class="snippet" tabindex="0">down for maintenance</pre>`)
	require.Contains(t, all.Body, `<td data-label="Status">503</td>`)
	require.Contains(t, all.Body, `<code>http_status</code>`, "the error class")
	require.Empty(t, link(all, "Older attempts"))
	require.Empty(t, link(all, "Newest"))

	t.Run("filters pass through", func(t *testing.T) {
		failed := b.get(endpointPath(ep.ID, "/deliveries?outcome=failed"))
		require.Equal(t, []string{"#1 failed"}, rows(failed))
		require.Contains(t, failed.Body, `<option value="failed" selected>failed</option>`)
		one := b.get(endpointPath(ep.ID, "/deliveries?sequence=1"))
		require.Equal(t, []string{"#1 delivered", "#1 failed"}, rows(one))
		require.Contains(t, one.field("f-sequence"), `value="1"`)
		both := b.get(endpointPath(ep.ID, "/deliveries?sequence=1&outcome=delivered"))
		require.Equal(t, []string{"#1 delivered"}, rows(both))
		require.NotEmpty(t, h.callsTo(http.MethodGet, "/deliveries?outcome=delivered&sequence=1"))
		none := b.get(endpointPath(ep.ID, "/deliveries?outcome=abandoned"))
		require.Empty(t, rows(none))
		require.Contains(t, none.Body, "No attempts match.")
	})
	t.Run("a filter the API refuses", func(t *testing.T) {
		_, _, violations := h.problemOf(p, http.MethodGet, "/v1/webhook_endpoints/"+ep.ID+"/deliveries?sequence=abc", "")
		require.NotEmpty(t, violations["sequence"])
		bad := b.get(endpointPath(ep.ID, "/deliveries?sequence=abc"))
		require.Equal(t, http.StatusBadRequest, bad.Status)
		field := bad.field("f-sequence")
		require.Contains(t, field, `aria-invalid="true" aria-describedby="e-sequence"`)
		require.Contains(t, field, `<p class="field-error">`+text(violations["sequence"])+`</p>`)
		require.Contains(t, field, `value="abc"`)
		require.NotContains(t, bad.field("f-outcome"), "field-error")
		require.Empty(t, rows(bad))

		bad = b.get(endpointPath(ep.ID, "/deliveries?outcome=sometimes"))
		require.Equal(t, http.StatusBadRequest, bad.Status)
		require.Contains(t, bad.field("f-outcome"), `class="field-error"`)
	})
	t.Run("pages", func(t *testing.T) {
		ep := h.register(p, nil)
		for i := range 25 {
			h.publish(ep.ID, "order.created", map[string]any{"n": i})
		}
		h.deliver()
		first := b.get(endpointPath(ep.ID, "/deliveries"))
		require.Len(t, rows(first), 20)
		require.Equal(t, "#25 delivered", rows(first)[0])
		older := link(first, "Older attempts")
		require.NotEmpty(t, older)
		u, err := url.Parse(older)
		require.NoError(t, err)
		require.Equal(t, endpointPath(ep.ID, "/deliveries"), u.Path)
		require.Regexp(t, `^att_\w+$`, u.Query().Get("starting_after"), older)
		second := b.get(older)
		require.Equal(t, http.StatusOK, second.Status, second.Body)
		require.Len(t, rows(second), 5)
		require.Equal(t, "#1 delivered", rows(second)[4])
		require.Empty(t, link(second, "Older attempts"))
		require.Equal(t, endpointPath(ep.ID, "/deliveries"), link(second, "Newest"))
		// Filters are kept from page to page.
		filtered := b.get(endpointPath(ep.ID, "/deliveries?outcome=delivered"))
		u, err = url.Parse(link(filtered, "Older attempts"))
		require.NoError(t, err)
		require.Equal(t, "delivered", u.Query().Get("outcome"))
		filteredSecond := b.get(u.String())
		require.Len(t, rows(filteredSecond), 5)
		require.Equal(t, endpointPath(ep.ID, "/deliveries?outcome=delivered"), html.UnescapeString(link(filteredSecond, "Newest")),
			"the newest page keeps the filters too")
	})
}

func TestEventPage(t *testing.T) {
	h := newHarness(t, nil)
	p := sandboxKey(licA)
	ep := h.register(p, map[string]any{"headers": map[string]string{"X-Tenant": "t-42", "X-Region": "eu"}})
	ev := h.publish(ep.ID, "order.created", map[string]any{"id": "ord_1", "amount": 1250, "lines": []string{"a", "b"}})
	h.answer(http.StatusInternalServerError, "oops")
	h.deliver()
	h.clock.Advance(time.Minute)
	h.answer(http.StatusOK, "ok")
	h.deliver()
	b := h.login(p)

	got := b.get(endpointPath(ep.ID, "/events/1"))
	require.Equal(t, http.StatusOK, got.Status, got.Body)
	require.Contains(t, got.Body, "<h1>Event #1</h1>")
	require.Contains(t, got.Body, "<code>order.created</code>")
	require.Contains(t, got.Body, "<code>"+ev.ID+"</code>")
	require.Contains(t, got.Body, t0.Format("2006-01-02 15:04:05 UTC"))
	// The body, pretty: the event as range retrieval returns it, indented.
	m := regexp.MustCompile(`(?s)<h2 id="body">Body</h2>\s*<pre class="code" tabindex="0">(.*?)</pre>`).FindStringSubmatch(got.Body)
	require.NotNil(t, m)
	pretty := html.UnescapeString(m[1])
	require.Contains(t, pretty, "\n  \"data\": {\n    \"amount\": 1250,")
	var shown map[string]any
	require.NoError(t, json.Unmarshal([]byte(pretty), &shown))
	require.Equal(t, ev.ID, shown["id"])
	require.Equal(t, map[string]any{"id": "ord_1", "amount": 1250.0, "lines": []any{"a", "b"}}, shown["data"])
	// The headers a delivery carries, custom ones included.
	m = regexp.MustCompile(`(?s)<h2 id="headers">Headers</h2>\s*<pre class="code" tabindex="0">(.*?)</pre>`).FindStringSubmatch(got.Body)
	require.NotNil(t, m)
	require.Equal(t, "Content-Type: application/json\nX-SVC-Sequence: 1\nX-SVC-Signature: t=…,v1=… (signed afresh at each attempt)\n"+
		"X-Region: eu\nX-Tenant: t-42\n", html.UnescapeString(m[1]))
	// Its attempts.
	attempts := regexp.MustCompile(`<li><span class="badge badge-(\w+)">\w+</span> attempt (\d) · status (\d+)`).FindAllStringSubmatch(got.Body, -1)
	require.Len(t, attempts, 2)
	require.Equal(t, []string{"delivered", "2", "200"}, attempts[0][1:])
	require.Equal(t, []string{"failed", "1", "500"}, attempts[1][1:])

	for _, seq := range []string{"2", "0", "abc", "-1", "99999999999999999999"} {
		missing := b.get(endpointPath(ep.ID, "/events/"+seq))
		require.Equal(t, http.StatusNotFound, missing.Status, seq)
		require.Contains(t, missing.Body, "No such event")
	}
}

func TestResend(t *testing.T) {
	h := newHarness(t, nil)
	p := sandboxKey(licA)
	ep := h.register(p, nil)
	h.publish(ep.ID, "order.created", map[string]any{"id": "ord_1"})
	h.deliver()
	require.Len(t, h.received(), 1)
	b := h.login(p)
	shown := b.get(endpointPath(ep.ID, "/events/1"))
	action := endpointPath(ep.ID, "/events/1/resend")
	form := url.Values{"idempotency_key": {shown.formKey(action)}}
	got := b.post(action, form)
	require.Equal(t, http.StatusSeeOther, got.Status, got.Body)
	require.Equal(t, endpointPath(ep.ID, "/events/1?done=resent"), got.Location())
	require.Contains(t, b.follow(got).Body, `<p class="notice" role="status">The event is queued to be sent again.</p>`)
	h.deliver()
	require.Len(t, h.received(), 2)
	again := h.received()[1]
	require.Equal(t, uint64(1), again.Event.Sequence)
	require.Equal(t, "true", again.Header.Get("X-SVC-Redelivery"))

	// The same form again acts once.
	require.Equal(t, http.StatusSeeOther, b.post(action, form).Status)
	h.deliver()
	require.Len(t, h.received(), 2)

	// An event the endpoint does not have.
	missing := b.post(endpointPath(ep.ID, "/events/7/resend"), url.Values{})
	require.Equal(t, http.StatusNotFound, missing.Status)
	require.Contains(t, missing.Body, "No such event")
	h.deliver()
	require.Len(t, h.received(), 2)
}

func TestRecover(t *testing.T) {
	h := newHarness(t, nil)
	p := sandboxKey(licA)
	ep := h.register(p, nil)
	for i := range 3 {
		h.publish(ep.ID, "order.created", map[string]any{"n": i})
	}
	h.deliver()
	require.Len(t, h.received(), 3)
	b := h.login(p)
	endpoint := b.get(endpointPath(ep.ID))
	require.Contains(t, endpoint.Body, `<a class="button" href="/portal/endpoints/`+ep.ID+`/recover">Recover a range</a>`)
	shown := b.get(endpointPath(ep.ID, "/recover"))
	require.Equal(t, http.StatusOK, shown.Status)
	action := endpointPath(ep.ID, "/recover")

	got := b.post(action, url.Values{"idempotency_key": {shown.formKey(action)}, "from": {" 2"}, "to": {"3 "}})
	require.Equal(t, http.StatusSeeOther, got.Status, got.Body)
	require.Equal(t, action+"?done=recovered_2", got.Location())
	require.Contains(t, b.follow(got).Body, "2 events are queued to be sent again.")
	var body map[string]any
	calls := h.callsTo(http.MethodPost, "/recover")
	require.Len(t, calls, 1)
	require.NoError(t, json.Unmarshal(calls[0].Body, &body))
	require.Equal(t, map[string]any{"from": 2.0, "to": 3.0}, body)
	h.deliver()
	got2 := h.received()[3:]
	require.Len(t, got2, 2)
	require.Equal(t, []uint64{2, 3}, []uint64{got2[0].Event.Sequence, got2[1].Event.Sequence})

	for _, tc := range []struct {
		name, from, to string
		bad            map[string]bool
	}{
		{"not numbers", "two", "", map[string]bool{"from": true, "to": true}},
		{"negative", "-1", "3", map[string]bool{"from": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(h.callsTo(http.MethodPost, "/recover"))
			got := b.post(action, url.Values{"from": {tc.from}, "to": {tc.to}})
			require.Equal(t, http.StatusBadRequest, got.Status)
			for _, f := range []string{"from", "to"} {
				field := got.field("f-" + f)
				if tc.bad[f] {
					require.Contains(t, field, `aria-invalid="true"`, f)
					require.Contains(t, field, "must be an event&#39;s sequence", f)
				} else {
					require.NotContains(t, field, "field-error", f)
				}
			}
			require.Contains(t, got.field("f-from"), `value="`+tc.from+`"`)
			require.Len(t, h.callsTo(http.MethodPost, "/recover"), before, "nothing was sent")
		})
	}
	for _, tc := range []struct {
		name, from, to, field string
	}{
		{"the API's: to before from", "3", "1", "to"},
		{"the API's: from zero", "0", "1", "from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, violations := h.problemOf(p, http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/recover",
				`{"from":`+tc.from+`,"to":`+tc.to+`}`)
			require.NotEmpty(t, violations["/"+tc.field])
			got := b.post(action, url.Values{"from": {tc.from}, "to": {tc.to}})
			require.Equal(t, http.StatusBadRequest, got.Status)
			require.Contains(t, got.field("f-"+tc.field), `<p class="field-error">`+text(violations["/"+tc.field])+`</p>`)
		})
	}
	t.Run("the API's: endpoint disabled", func(t *testing.T) {
		status, out := h.call(p, http.MethodPatch, "/v1/webhook_endpoints/"+ep.ID, `{"status":"disabled"}`)
		require.Equal(t, http.StatusOK, status, "%s", out)
		got := b.post(action, url.Values{"from": {"1"}, "to": {"1"}})
		require.Equal(t, http.StatusUnprocessableEntity, got.Status)
		require.Contains(t, got.Body, "is disabled (manual): nothing would be sent; enable it first")
		require.Contains(t, got.field("f-from"), `value="1"`)
	})
	h.deliver()
	require.Len(t, h.received(), 5, "nothing more was pushed")
}

func TestEventTypesPage(t *testing.T) {
	h := newHarness(t, nil)
	b := h.login(sandboxKey(licA))
	got := b.get(prefix + "/event_types")
	require.Equal(t, http.StatusOK, got.Status)
	require.Contains(t, got.Body, `<a href="/portal/event_types" aria-current="page">Event types</a>`)
	types := regexp.MustCompile(`<tr><td data-label="Type"><code>([^<]+)</code></td><td data-label="Sent when">([^<]+)</td></tr>`).
		FindAllStringSubmatch(got.Body, -1)
	require.Len(t, types, len(catalogue))
	for i, et := range catalogue {
		require.Equal(t, []string{et.Type, et.Description}, types[i][1:])
	}
}

func TestSandboxFaults(t *testing.T) {
	h := newHarness(t, nil)
	p := sandboxKey(licA)
	ep := h.register(p, nil)
	b := h.login(p)
	shown := b.get(endpointPath(ep.ID))
	require.Contains(t, shown.Body, `<h2 id="sandbox">Sandbox tools</h2>`)
	action := endpointPath(ep.ID, "/faults")
	form := url.Values{"idempotency_key": {shown.formKey(action)}, "action": {"set"}, "drop": {"0.25"}, "duplicate": {""},
		"reorder": {"0"}, "bad_signature": {"1"}, "delay": {"0.5"}, "delay_ms": {"2000"}}
	got := b.post(action, form)
	require.Equal(t, http.StatusSeeOther, got.Status, got.Body)
	require.Equal(t, endpointPath(ep.ID)+"?done=faults_set", got.Location())
	require.Contains(t, b.follow(got).Body, "The faults are set")
	require.Equal(t, sandbox.Faults{Drop: 0.25, BadSignature: 1, Delay: 0.5, DelayMS: 2000}, h.faults.FaultsFor(ep.ID))
	puts := h.callsTo(http.MethodPut, "/v1/sandbox/webhook_endpoints/"+ep.ID+"/faults")
	require.Len(t, puts, 1)
	require.Equal(t, form.Get("idempotency_key"), puts[0].Key)

	t.Run("a rate the API refuses", func(t *testing.T) {
		_, _, violations := h.problemOf(p, http.MethodPut, "/v1/sandbox/webhook_endpoints/"+ep.ID+"/faults", `{"drop":2}`)
		require.NotEmpty(t, violations["/drop"])
		got := b.post(action, url.Values{"action": {"set"}, "drop": {"2"}, "delay": {"0.1"}})
		require.Equal(t, http.StatusBadRequest, got.Status, got.Body)
		field := got.field("f-drop")
		require.Contains(t, field, `aria-invalid="true" aria-describedby="e-drop"`)
		require.Contains(t, field, `<div id="e-drop"><p class="field-error">`+text(violations["/drop"])+`</p></div>`)
		require.Contains(t, field, `value="2"`, "the form as sent")
		require.Contains(t, got.field("f-delay"), `value="0.1"`)
		require.NotContains(t, got.field("f-delay"), "field-error")
		sbx := got.element("section", `<section class="card sandbox"`, `<h2 id="sandbox">`)
		require.Contains(t, sbx, `<div class="problem" role="alert">`)
		require.Equal(t, sandbox.Faults{Drop: 0.25, BadSignature: 1, Delay: 0.5, DelayMS: 2000}, h.faults.FaultsFor(ep.ID), "unchanged")
	})
	t.Run("not a number", func(t *testing.T) {
		before := len(h.callsTo(http.MethodPut, "/faults"))
		for _, v := range []string{"lots", "NaN", "Inf"} {
			got := b.post(action, url.Values{"action": {"set"}, "duplicate": {v}})
			require.Equal(t, http.StatusBadRequest, got.Status)
			require.Contains(t, got.field("f-duplicate"), "must be a rate between 0 and 1")
		}
		got := b.post(action, url.Values{"action": {"set"}, "delay_ms": {"1.5"}})
		require.Contains(t, got.field("f-delay_ms"), "must be a whole number of milliseconds")
		require.Len(t, h.callsTo(http.MethodPut, "/faults"), before, "nothing was sent")
	})
	t.Run("clear", func(t *testing.T) {
		shown := b.get(endpointPath(ep.ID))
		got := b.post(action, url.Values{"idempotency_key": {shown.formKey(action)}, "action": {"clear"}, "drop": {"0.9"}})
		require.Equal(t, http.StatusSeeOther, got.Status, got.Body)
		require.Contains(t, b.follow(got).Body, "The faults are cleared.")
		require.True(t, h.faults.FaultsFor(ep.ID).IsZero())
		require.Len(t, h.callsTo(http.MethodDelete, "/v1/sandbox/webhook_endpoints/"+ep.ID+"/faults"), 1)
	})
}

func TestTestEvent(t *testing.T) {
	h := newHarness(t, nil)
	p := sandboxKey(licA)
	ep := h.register(p, map[string]any{"enabled_events": []string{"order.created", "sandbox.test"}})
	other := h.register(p, nil)
	b := h.login(p)
	shown := b.get(endpointPath(ep.ID))
	action := endpointPath(ep.ID, "/test_event")
	require.Contains(t, shown.form(action), `<option value="order.created">order.created</option>`)

	for i, typ := range []string{"order.created", ""} {
		got := b.post(action, url.Values{"idempotency_key": {b.get(endpointPath(ep.ID)).formKey(action)}, "type": {typ}})
		require.Equal(t, http.StatusSeeOther, got.Status, got.Body)
		require.Equal(t, endpointPath(ep.ID)+"?done=test_event_sent", got.Location())
		require.Contains(t, b.follow(got).Body, "A test event is on its way to this endpoint.")
		h.deliver()
		recv := h.received()
		require.Len(t, recv, i+1)
		last := recv[i].Event
		require.Equal(t, ep.ID, last.Endpoint, "to that endpoint only")
		require.Equal(t, uint64(i+1), last.Sequence)
		require.Equal(t, map[string]string{"order.created": "order.created", "": sandbox.DefaultTestEventType}[typ], last.Type)
	}
	evs, _, err := h.log.Range(t.Context(), other.ID, 1, 10, 10)
	require.NoError(t, err)
	require.Empty(t, evs, "the other endpoint got nothing")

	t.Run("a type the endpoint does not take", func(t *testing.T) {
		got := b.post(action, url.Values{"type": {"order.cancelled"}})
		require.Equal(t, http.StatusBadRequest, got.Status, got.Body)
		sbx := got.element("section", `<section class="card sandbox"`, `<h2 id="sandbox">`)
		require.Contains(t, sbx, `<div class="problem" role="alert">`)
		h.deliver()
		require.Len(t, h.received(), 2)
	})
}
