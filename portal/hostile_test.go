package portal_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// hostile are strings a tenant (or a tenant's consumer) may put wherever the portal shows what it
// controls, each aimed at one way out of html/template's escaping.
var hostile = []string{
	`<script>alert(1)</script>`,
	`"><img src=x onerror=alert(1)>`,
	`javascript:alert(1)`,
	`</textarea>`,
	`{{.}}`,
}

// requireInert checks that nothing hostile became markup on p: no script but the portal's own,
// no img, a textarea closed only by the portal, no javascript: URL in an attribute that loads or
// navigates, and the template syntax left as text.
func requireInert(t *testing.T, name string, p *page) {
	t.Helper()
	require.NotContains(t, p.Body, hostile[0], name)
	require.NotContains(t, p.Body, hostile[1], name)
	require.NotContains(t, p.Body, "<img", name)
	require.NotContains(t, p.Body, "onerror=alert(1)>", name)
	require.Equal(t, 1, strings.Count(p.Body, "<script"), "%s: the portal's own script only", name)
	require.Equal(t, strings.Count(p.Body, "<textarea"), strings.Count(p.Body, "</textarea>"), name)
	require.NotRegexp(t, `(?i)\b(href|src|action|formaction)\s*=\s*["']?\s*javascript:`, p.Body, name)
}

func TestHostileStrings(t *testing.T) {
	h := newHarness(t, nil)
	p := sandboxKey(licA)
	all := strings.Join(hostile, " ")
	// The query's spaces escaped: the registration takes a raw space, but no server takes the
	// request line it makes.
	hostileURL := h.consumer.URL + `/` + hostile[0] + `?q=` + strings.ReplaceAll(hostile[1], " ", "%20") + `&r=` + hostile[2] +
		`&t=` + hostile[3] + `&u=` + hostile[4]
	headers := map[string]string{"X-Script": hostile[0], "X-Img": hostile[1], "X-Js": hostile[2], "X-Textarea": hostile[3], "X-Tmpl": hostile[4]}
	metadata := map[string]string{}
	for _, s := range hostile {
		metadata[s] = s
	}
	named := h.register(p, map[string]any{"url": hostileURL, "description": all, "headers": headers, "metadata": metadata})
	unnamed := h.register(p, map[string]any{"url": hostileURL}) // its URL is its name
	for _, id := range []string{named.ID, unnamed.ID} {
		h.publish(id, "order.created", map[string]any{"script": hostile[0], "img": hostile[1], "js": hostile[2],
			"textarea": hostile[3], "tmpl": hostile[4]})
	}
	h.answer(http.StatusInternalServerError, all) // the consumer's answer lands in the history
	h.deliver()
	require.Len(t, h.received(), 2)

	b := h.login(p)
	type want struct {
		name string
		page *page
		// shown are the strings the page must show, escaped.
		shown []string
	}
	headerLines := func() []string {
		var out []string
		for k, v := range headers {
			out = append(out, k+": "+v)
		}
		return out
	}
	pages := []want{
		{"endpoints", b.get(prefix + "/endpoints"), []string{all, hostileURL}},
		{"named endpoint", b.get(endpointPath(named.ID)), append([]string{all, hostileURL}, hostile...)},
		{"unnamed endpoint", b.get(endpointPath(unnamed.ID)), []string{hostileURL}},
		{"deliveries", b.get(endpointPath(named.ID, "/deliveries")), []string{all}},
		{"unnamed deliveries", b.get(endpointPath(unnamed.ID, "/deliveries")), []string{hostileURL, all}},
		{"event", b.get(endpointPath(named.ID, "/events/1")), append([]string{all}, headerLines()...)},
		{"unnamed event", b.get(endpointPath(unnamed.ID, "/events/1")), []string{hostileURL}},
		{"recover", b.get(endpointPath(named.ID, "/recover")), []string{all, hostileURL}},
		{"delete", b.get(endpointPath(named.ID, "/delete")), []string{all, hostileURL}},
		{"unnamed delete", b.get(endpointPath(unnamed.ID, "/delete")), []string{hostileURL}},
		{"hostile filters", b.get(endpointPath(named.ID, "/deliveries?sequence="+url.QueryEscape(hostile[0])+
			"&outcome="+url.QueryEscape(hostile[1]))), []string{hostile[0]}},
		{"hostile event number", b.get(endpointPath(named.ID, "/events/"+url.PathEscape(hostile[0]))), nil},
		{"hostile path", b.get(prefix + "/" + url.PathEscape(hostile[1])), nil},
		{"hostile link", h.browser().get(prefix + "/login?token=" + url.QueryEscape(hostile[0])), nil},
	}
	// The forms echo what was typed.
	shown := b.get(prefix + "/endpoints")
	created := b.post(prefix+"/endpoints", url.Values{"idempotency_key": {shown.formKey(prefix + "/endpoints")}, "url": {hostileURL},
		"description": {all}, "event": {"*"}, "headers": {"X-T: " + hostile[3] + hostile[0]}})
	require.Equal(t, http.StatusCreated, created.Status, created.Body)
	pages = append(pages, want{"secret", created, []string{hostileURL}})
	refused := b.post(prefix+"/endpoints", url.Values{"url": {hostile[2]}, "description": {all}, "event": {"*", hostile[1]},
		"api_version": {hostile[1]}, "headers": {"X-T: " + hostile[3] + hostile[0]}})
	require.Equal(t, http.StatusBadRequest, refused.Status)
	pages = append(pages, want{"refused create", refused, []string{all, "X-T: " + hostile[3] + hostile[0]}})
	edit := b.get(endpointPath(named.ID))
	refusedEdit := b.post(endpointPath(named.ID), url.Values{"idempotency_key": {edit.formKey(endpointPath(named.ID))},
		"url": {hostile[2]}, "description": {all}, "event": {"*"}, "headers": {"X-T: " + hostile[3]}})
	require.Equal(t, http.StatusBadRequest, refusedEdit.Status)
	pages = append(pages, want{"refused edit", refusedEdit, []string{all}})
	badFaults := b.post(endpointPath(named.ID, "/faults"), url.Values{"action": {"set"}, "drop": {hostile[1]}, "delay_ms": {hostile[0]}})
	require.Equal(t, http.StatusBadRequest, badFaults.Status)
	pages = append(pages, want{"refused faults", badFaults, []string{hostile[1], hostile[0]}})
	badRecover := b.post(endpointPath(named.ID, "/recover"), url.Values{"from": {hostile[1]}, "to": {hostile[0]}})
	require.Equal(t, http.StatusBadRequest, badRecover.Status)
	pages = append(pages, want{"refused recover", badRecover, []string{hostile[1], hostile[0]}})

	for _, w := range pages {
		t.Run(w.name, func(t *testing.T) {
			require.Less(t, w.page.Status, 500, w.page.Body)
			requireInert(t, w.name, w.page)
			for _, s := range w.shown {
				require.Contains(t, w.page.Body, text(s), "%s shows %q escaped", w.name, s)
			}
		})
	}
	t.Run("the payload", func(t *testing.T) {
		// The event's JSON is shown as the API serves it, whose encoder escapes < and > itself.
		event := pages[5].page
		body := regexp.MustCompile(`(?s)<h2 id="body">Body</h2>\s*<pre class="code" tabindex="0">(.*?)</pre>`).FindStringSubmatch(event.Body)
		require.NotNil(t, body)
		require.Contains(t, body[1], `\u003cscript\u003ealert(1)\u003c/script\u003e`)
		require.Contains(t, body[1], `javascript:alert(1)`)
		require.Contains(t, body[1], `{{.}}`)
		require.Contains(t, body[1], `&#34;tmpl&#34;: &#34;{{.}}&#34;`)
	})
	t.Run("the template syntax stays text", func(t *testing.T) {
		for _, w := range pages[:2] {
			require.Contains(t, w.page.Body, "{{.}}", w.name)
		}
	})
}
