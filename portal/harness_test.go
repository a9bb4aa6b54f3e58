package portal_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/internal/testclock"
	"github.com/svcplatform/conventions/portal"
	"github.com/svcplatform/conventions/sandbox"
	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/versioning"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// The portal is tested against a real API built from the library's own handlers on in-memory
// stores, mounted the way a platform mounts them (the reference server's routes.go): the versioning
// router strips /v1, a restricted key reaches only the routes its permissions cover, mutating routes
// go behind the idempotency middleware, every handler scopes its data by apikey.RequestScope.
// Events are published with a Publisher and delivered, synchronously, by a Dispatcher to an httptest
// consumer, so that the pages have deliveries, statistics and responses to show.

// t0 is the harness's starting time: whole seconds, as the versioning registry wants.
var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

const (
	licA = "lic_a"
	licB = "lic_b"
	// baseURL is where the harness's portal is reached, unless options say otherwise; prefix is
	// its path, the same for every BaseURL the tests use.
	baseURL = "https://portal.example.com/portal"
	prefix  = "/portal"
)

// The event catalogue of the harness's API.
var catalogue = []producer.EventType{
	{Type: "order.created", Description: "An order was placed."},
	{Type: "order.cancelled", Description: "An order was cancelled."},
	{Type: sandbox.DefaultTestEventType, Description: "A test event from the sandbox tools."},
}

// permissionOf is what each route of the harness's API requires of a restricted key, by the
// pattern the API mux matched (the reference server declares the same next to each route).
var permissionOf = map[string]string{
	"POST /webhook_endpoints":                               "webhook_endpoints:write",
	"PATCH /webhook_endpoints/{id}":                         "webhook_endpoints:write",
	"DELETE /webhook_endpoints/{id}":                        "webhook_endpoints:write",
	"POST /webhook_endpoints/{id}/roll_secret":              "webhook_endpoints:write",
	"GET /webhook_endpoints":                                "webhook_endpoints:read",
	"GET /webhook_endpoints/{id}":                           "webhook_endpoints:read",
	"GET /event_types":                                      "webhook_endpoints:read",
	"GET /webhook_endpoints/{id}/stats":                     "webhook_endpoints:read",
	"GET /webhook_endpoints/{id}/events":                    "events:read",
	"GET /webhook_endpoints/{id}/deliveries":                "events:read",
	"POST /webhook_endpoints/{id}/events/{sequence}/resend": "events:write",
	"POST /webhook_endpoints/{id}/recover":                  "events:write",
	"POST /portal_sessions":                                 "webhook_endpoints:read",
	"/sandbox/":                                             "sandbox:write",
}

// apiCall is one request the API received, as the portal (or a test) sent it.
type apiCall struct {
	Method, Path, Key string
	Body              []byte
}

// delivery is one delivery the consumer received.
type delivery struct {
	Path   string
	Header http.Header
	Event  webhook.Event
}

// harness is an API, a portal in front of it, and a consumer the API delivers to.
type harness struct {
	t        *testing.T
	clock    *testclock.Clock
	problems apierror.Writer
	eps      *memstore.Endpoints
	log      *memstore.Log
	pub      *producer.Publisher
	disp     *producer.Dispatcher
	faults   *sandbox.FaultTable
	api      http.Handler // the versioned API below authentication: what the portal calls
	portal   *portal.Portal
	base     string // the portal's BaseURL
	consumer *httptest.Server
	keys     atomic.Int64 // numbers the Idempotency-Keys of the tests' own API requests

	mu       sync.Mutex
	calls    []apiCall
	got      []delivery
	respond  func(w http.ResponseWriter, r *http.Request) // the consumer's answer; nil: 200 "ok"
	setFault []string                                     // endpoints whose faults the SetFaults hook was asked to set
}

// options vary the harness.
type options struct {
	baseURL        string
	store          portal.Store
	frameAncestors []string
	apiVersions    func() []string
	// wrapAPI, when set, stands between the portal and the API: a failing API, say.
	wrapAPI func(http.Handler) http.Handler
}

func newHarness(t *testing.T, o *options) *harness {
	t.Helper()
	if o == nil {
		o = &options{}
	}
	h := &harness{t: t, clock: testclock.New(t0), faults: &sandbox.FaultTable{}}
	h.problems = apierror.Writer{TypeBase: "https://api.example.com/problems/"}
	var err error
	h.eps, err = memstore.NewEndpoints()
	require.NoError(t, err)
	h.log = memstore.NewLog()
	h.pub, err = producer.NewPublisher(h.log, h.eps, &producer.PublisherOptions{APIVersion: "v1", Now: h.clock.Now})
	require.NoError(t, err)

	h.consumer = httptest.NewServer(http.HandlerFunc(h.receive))
	t.Cleanup(h.consumer.Close)
	client := *h.consumer.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	// The consumer is the test's own: a plain client, so that its answers are kept in the history as
	// they would be from a public address (an allow-listed one is recorded by status alone).
	h.disp, err = producer.NewDispatcher(h.log, h.eps, &producer.DispatcherOptions{
		Client: &client, Now: h.clock.Now, Jitter: -1, DisableAfter: -1,
		Schedule: []time.Duration{time.Minute, time.Minute},
	})
	require.NoError(t, err)

	// Registration accepts the consumer's loopback http URL, and nothing else private.
	policy := ssrf.URLPolicy{AllowHTTP: true,
		Guard: &ssrf.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}
	idem, err := idempotency.New(&idempotency.Options{Scope: apikey.RequestScope, Now: h.clock.Now, Problems: h.problems})
	require.NoError(t, err)
	endpoints, err := producer.NewEndpointsHandler(h.eps, apikey.RequestScope, &producer.EndpointsHandlerOptions{
		EventTypes:  catalogue,
		URLPolicy:   func(*http.Request) ssrf.URLPolicy { return policy },
		APIVersion:  func(*http.Request) string { return "v1" },
		APIVersions: func() []string { return []string{"v1", "v2"} },
		Now:         h.clock.Now, Problems: h.problems,
	})
	require.NoError(t, err)
	ranges, err := producer.NewRangeHandler(h.log, h.eps, apikey.RequestScope,
		&producer.RangeHandlerOptions{Now: h.clock.Now, Problems: h.problems})
	require.NoError(t, err)
	deliveries, err := producer.NewDeliveriesHandler(h.log, h.eps, apikey.RequestScope,
		&producer.DeliveriesHandlerOptions{Now: h.clock.Now, Problems: h.problems})
	require.NoError(t, err)
	controls, err := sandbox.NewControls(sandbox.Hooks{Trigger: h.trigger, SetFaults: h.setFaults},
		&sandbox.ControlsOptions{Prefix: "/sandbox", NotFound: h.problems.NotFoundHandler(), Problems: h.problems})
	require.NoError(t, err)
	h.portal, err = portal.New(&portal.Options{
		API:     http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.api.ServeHTTP(w, r) }),
		BaseURL: cmp.Or(o.baseURL, baseURL), Store: o.store, FrameAncestors: o.frameAncestors,
		APIVersions: o.apiVersions, Now: h.clock.Now,
	})
	require.NoError(t, err)

	mux := http.NewServeMux()
	endpoints.Register(mux, "", idem.Handler)
	mux.Handle(producer.RangePattern(""), ranges)
	deliveries.Register(mux, "", idem.Handler)
	mux.Handle("POST /portal_sessions", idem.Handler(h.portal.SessionsHandler(h.problems)))
	mux.Handle("/sandbox/", idem.Handler(controls))
	auth := h.authenticator()
	apiMux := h.problems.ServeMux(mux)
	permit := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := mux.Handler(r)
		perm, ok := permissionOf[pattern]
		if !ok {
			apiMux.ServeHTTP(w, r) // a refusal of the mux: 404 or 405
			return
		}
		auth.Require(perm, apiMux).ServeHTTP(w, r)
	})
	reg, err := versioning.NewRegistry([]versioning.Version{{Name: "v1"}}, nil)
	require.NoError(t, err)
	router, err := versioning.New(reg, &versioning.Options{Now: h.clock.Now, Licensee: apikey.RequestScope,
		StripVersion: true, Problems: h.problems})
	require.NoError(t, err)
	var api http.Handler = apierror.WithRequestID(h.problems.Handler(router.Handler(permit)))
	if o.wrapAPI != nil {
		api = o.wrapAPI(api)
	}
	h.api = h.recordCalls(api)
	h.base = cmp.Or(o.baseURL, baseURL)
	return h
}

// authenticator is an apikey.Authenticator, for its Require: the portal's requests arrive with
// their principal, so nothing here authenticates.
func (h *harness) authenticator() *apikey.Authenticator {
	issuer, err := apikey.NewIssuer(nil, nil)
	require.NoError(h.t, err)
	auth, err := apikey.NewAuthenticator(issuer, &apikey.AuthenticatorOptions{Problems: h.problems})
	require.NoError(h.t, err)
	return auth
}

// recordCalls notes every request that reaches the API.
func (h *harness) recordCalls(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.mu.Lock()
		h.calls = append(h.calls, apiCall{Method: r.Method, Path: r.URL.RequestURI(), Key: r.Header.Get(idempotency.HeaderKey), Body: body})
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// callsTo returns the API requests made with method to a path that contains part.
func (h *harness) callsTo(method, part string) []apiCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []apiCall
	for _, c := range h.calls {
		if c.Method == method && strings.Contains(c.Path, part) {
			out = append(out, c)
		}
	}
	return out
}

// receive is the consumer: it records each delivery and answers as h.respond says.
func (h *harness) receive(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var ev webhook.Event
	_ = json.Unmarshal(body, &ev)
	h.mu.Lock()
	h.got = append(h.got, delivery{Path: r.URL.RequestURI(), Header: r.Header.Clone(), Event: ev})
	respond := h.respond
	h.mu.Unlock()
	if respond != nil {
		respond(w, r)
		return
	}
	_, _ = io.WriteString(w, "ok")
}

// received returns the deliveries the consumer got.
func (h *harness) received() []delivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]delivery(nil), h.got...)
}

// answer sets how the consumer answers.
func (h *harness) answer(status int, body string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.respond = func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// own returns endpoint id when p owns it and it is not deleted; sandbox.ErrUnknownEndpoint otherwise.
func (h *harness) own(ctx context.Context, p apikey.Principal, id string) (producer.Endpoint, error) {
	ep, err := h.eps.Lookup(ctx, id)
	if errors.Is(err, producer.ErrUnknownEndpoint) || (err == nil && (ep.Owner != p.Scope() || !ep.DeletedAt.IsZero())) {
		return producer.Endpoint{}, sandbox.ErrUnknownEndpoint
	}
	return ep, err
}

// trigger is the sandbox's Trigger hook: a test event through the normal delivery path.
func (h *harness) trigger(ctx context.Context, p apikey.Principal, req sandbox.TriggerRequest) ([]sandbox.Triggered, error) {
	if req.Endpoint == "" {
		return nil, apierror.Invalid(apierror.Body("/endpoint", "endpoint_required", "the harness triggers one endpoint at a time"))
	}
	ep, err := h.own(ctx, p, req.Endpoint)
	if err != nil {
		return nil, err
	}
	if !ep.Subscribed(req.Type) {
		return nil, apierror.Invalid(apierror.Body("/type", "not_subscribed", "the endpoint is not subscribed to this event type"))
	}
	evs, err := h.pub.PublishToEach(ctx, []producer.Endpoint{ep}, req.Type, req.Data)
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.Triggered, len(evs))
	for i, ev := range evs {
		out[i] = sandbox.Triggered{Endpoint: ev.Endpoint, Event: ev}
	}
	return out, nil
}

// setFaults is the sandbox's SetFaults hook, into the harness's FaultTable.
func (h *harness) setFaults(ctx context.Context, p apikey.Principal, id string, f sandbox.Faults) error {
	if _, err := h.own(ctx, p, id); err != nil {
		return err
	}
	h.mu.Lock()
	h.setFault = append(h.setFault, id)
	h.mu.Unlock()
	return h.faults.Set(id, f)
}

// deliver runs the Dispatcher until nothing is due.
func (h *harness) deliver() {
	h.t.Helper()
	for range 100 {
		st, err := h.disp.DeliverDue(context.Background())
		require.NoError(h.t, err)
		if st.Claimed == 0 {
			return
		}
	}
	h.t.Fatal("deliveries never ran out")
}

// publish appends one event of type typ for endpoint id.
func (h *harness) publish(id, typ string, data any) webhook.Event {
	h.t.Helper()
	ev, err := h.pub.Publish(context.Background(), id, typ, data)
	require.NoError(h.t, err)
	return ev
}

// Principals.
func sandboxKey(lic string) apikey.Principal {
	return apikey.Principal{Licensee: lic, Environment: apikey.Sandbox, KeyID: "key_" + lic}
}

func liveKey(lic string) apikey.Principal {
	return apikey.Principal{Licensee: lic, Environment: apikey.Live, KeyID: "key_live_" + lic}
}

// call sends one request to the API as p, the way a client with p's key would (below
// authentication); a mutating request gets a fresh Idempotency-Key.
func (h *harness) call(p apikey.Principal, method, path, body string) (int, []byte) {
	h.t.Helper()
	var rd io.Reader = http.NoBody
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, "https://api.example.com"+path, rd)
	r = r.WithContext(apikey.NewContext(r.Context(), p))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if method != http.MethodGet {
		r.Header.Set(idempotency.HeaderKey, fmt.Sprintf("test_%d", h.keys.Add(1)))
	}
	w := httptest.NewRecorder()
	h.api.ServeHTTP(w, r)
	return w.Code, w.Body.Bytes()
}

// endpoint is what the API says of an endpoint.
type endpoint struct {
	ID                      string            `json:"id"`
	URL                     string            `json:"url"`
	APIVersion              string            `json:"api_version"`
	Description             string            `json:"description"`
	EnabledEvents           []string          `json:"enabled_events"`
	Metadata                map[string]string `json:"metadata"`
	Headers                 map[string]string `json:"headers"`
	Status                  string            `json:"status"`
	PreviousSecretExpiresAt *int64            `json:"previous_secret_expires_at"`
	Secret                  string            `json:"secret"`
}

// register creates an endpoint for p through the API; body members override the defaults.
func (h *harness) register(p apikey.Principal, members map[string]any) endpoint {
	h.t.Helper()
	body := map[string]any{"url": h.consumer.URL + "/hooks", "enabled_events": []string{"*"}}
	for k, v := range members {
		body[k] = v
	}
	b, err := json.Marshal(body)
	require.NoError(h.t, err)
	status, out := h.call(p, http.MethodPost, "/v1/webhook_endpoints", string(b))
	require.Equal(h.t, http.StatusCreated, status, "%s", out)
	var ep endpoint
	require.NoError(h.t, json.Unmarshal(out, &ep))
	return ep
}

// get reads an endpoint through the API as p; ok is false on a 404.
func (h *harness) get(p apikey.Principal, id string) (endpoint, bool) {
	h.t.Helper()
	status, out := h.call(p, http.MethodGet, "/v1/webhook_endpoints/"+id, "")
	if status == http.StatusNotFound {
		return endpoint{}, false
	}
	require.Equal(h.t, http.StatusOK, status, "%s", out)
	var ep endpoint
	require.NoError(h.t, json.Unmarshal(out, &ep))
	return ep, true
}

// list lists p's endpoints through the API.
func (h *harness) list(p apikey.Principal) []endpoint {
	h.t.Helper()
	status, out := h.call(p, http.MethodGet, "/v1/webhook_endpoints", "")
	require.Equal(h.t, http.StatusOK, status, "%s", out)
	var l struct {
		Data []endpoint `json:"data"`
	}
	require.NoError(h.t, json.Unmarshal(out, &l))
	return l.Data
}

// mint asks the API for a portal link as p (POST /v1/portal_sessions) and returns its URL.
func (h *harness) mint(p apikey.Principal) string {
	h.t.Helper()
	status, out := h.call(p, http.MethodPost, "/v1/portal_sessions", "")
	require.Equal(h.t, http.StatusCreated, status, "%s", out)
	var s struct {
		URL string `json:"url"`
	}
	require.NoError(h.t, json.Unmarshal(out, &s))
	return s.URL
}

// browser is a visitor of the portal: a cookie jar and the habit of sending Sec-Fetch-Site and
// Origin with a form, as a browser does.
type browser struct {
	h   *harness
	jar *jar
	// origin is where the portal is: the scheme and host of its BaseURL.
	origin string
}

func (h *harness) browser() *browser {
	u, err := url.Parse(h.base)
	require.NoError(h.t, err)
	return &browser{h: h, jar: &jar{now: h.clock.Now, cookies: map[string]*http.Cookie{}}, origin: u.Scheme + "://" + u.Host}
}

// jar is a browser's cookies for the portal's one host, expired by the harness's clock (a
// cookiejar.Jar would expire them by the real one): what it keeps is what a browser would send.
type jar struct {
	now     func() time.Time
	cookies map[string]*http.Cookie
}

func (j *jar) SetCookies(_ *url.URL, cs []*http.Cookie) {
	for _, c := range cs {
		if c.MaxAge < 0 || (!c.Expires.IsZero() && !c.Expires.After(j.now())) {
			delete(j.cookies, c.Name)
			continue
		}
		j.cookies[c.Name] = c
	}
}

func (j *jar) Cookies(u *url.URL) []*http.Cookie {
	var out []*http.Cookie
	for _, c := range j.cookies {
		if (!c.Expires.IsZero() && !c.Expires.After(j.now())) || (c.Secure && u.Scheme != "https") {
			continue
		}
		if p := cmp.Or(c.Path, "/"); !strings.HasPrefix(u.Path, p) && u.Path+"/" != p {
			continue
		}
		out = append(out, &http.Cookie{Name: c.Name, Value: c.Value})
	}
	return out
}

// login opens a fresh link of p's (minted through the API) in a new browser.
func (h *harness) login(p apikey.Principal) *browser {
	h.t.Helper()
	b := h.browser()
	b.open(h.mint(p))
	return b
}

// page is one answer of the portal.
type page struct {
	t      *testing.T
	Status int
	Header http.Header
	Body   string
}

// Location is where a redirect points.
func (p *page) Location() string { return p.Header.Get("Location") }

// do sends one request to the portal; target is a path ("/portal/endpoints") or an absolute URL.
func (b *browser) do(method, target string, form url.Values, header ...string) *page {
	b.h.t.Helper()
	if strings.HasPrefix(target, "/") {
		target = b.origin + target
	}
	var rd io.Reader
	if form != nil {
		rd = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, target, rd)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if method == http.MethodPost {
		r.Header.Set("Sec-Fetch-Site", "same-origin")
		r.Header.Set("Origin", b.origin)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			r.Header.Del(header[i])
		} else {
			r.Header.Set(header[i], header[i+1])
		}
	}
	for _, c := range b.jar.Cookies(r.URL) {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	b.h.portal.ServeHTTP(w, r)
	resp := w.Result()
	b.jar.SetCookies(r.URL, resp.Cookies())
	return &page{t: b.h.t, Status: w.Code, Header: w.Header(), Body: w.Body.String()}
}

func (b *browser) get(target string) *page { b.h.t.Helper(); return b.do(http.MethodGet, target, nil) }

func (b *browser) post(target string, form url.Values) *page {
	b.h.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	return b.do(http.MethodPost, target, form)
}

// follow answers a redirect by getting its target; other answers are returned as they are.
func (b *browser) follow(p *page) *page {
	b.h.t.Helper()
	switch p.Status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	default:
		return p
	}
	return b.get(p.Location())
}

// open opens a link and presses its button, landing on the endpoints page.
func (b *browser) open(link string) *page {
	b.h.t.Helper()
	shown := b.get(link)
	require.Equal(b.h.t, http.StatusOK, shown.Status, shown.Body)
	token := shown.hidden("token")
	p := b.post(prefix+"/login", url.Values{"token": {token}})
	require.Equal(b.h.t, http.StatusSeeOther, p.Status, p.Body)
	return b.follow(p)
}

// session returns the browser's session cookie, nil when it has none.
func (b *browser) session() *http.Cookie {
	u, _ := url.Parse(b.origin + prefix + "/")
	for _, c := range b.jar.Cookies(u) {
		if strings.HasSuffix(c.Name, "portal_session") {
			return c
		}
	}
	return nil
}

// hidden returns the value of the page's first hidden input named name.
func (p *page) hidden(name string) string {
	p.t.Helper()
	m := regexp.MustCompile(`<input type="hidden" name="` + regexp.QuoteMeta(name) + `" value="([^"]*)">`).FindStringSubmatch(p.Body)
	require.NotNil(p.t, m, "no hidden %s in\n%s", name, p.Body)
	return m[1]
}

// form returns the page's form that posts to action.
func (p *page) form(action string) string {
	p.t.Helper()
	m := regexp.MustCompile(`(?s)<form method="post" action="` + regexp.QuoteMeta(action) + `"[^>]*>.*?</form>`).FindString(p.Body)
	require.NotEmpty(p.t, m, "no form to %s in\n%s", action, p.Body)
	return m
}

// hiddenIn returns the value of the hidden input name of the form that posts to action.
func (p *page) hiddenIn(action, name string) string {
	p.t.Helper()
	m := regexp.MustCompile(`<input type="hidden" name="` + regexp.QuoteMeta(name) + `" value="([^"]*)">`).FindStringSubmatch(p.form(action))
	require.NotNil(p.t, m, "no hidden %s in the form to %s", name, action)
	return m[1]
}

// formKey returns the Idempotency-Key of the page's form that posts to action.
func (p *page) formKey(action string) string {
	p.t.Helper()
	re := regexp.MustCompile(`(?s)<form method="post" action="` + regexp.QuoteMeta(action) + `"[^>]*>\s*<input type="hidden" name="idempotency_key" value="([^"]+)">`)
	m := re.FindStringSubmatch(p.Body)
	require.NotNil(p.t, m, "no form to %s in\n%s", action, p.Body)
	return m[1]
}

// hasForm reports whether the page has a form that posts to action.
func (p *page) hasForm(action string) bool {
	return strings.Contains(p.Body, `<form method="post" action="`+action+`"`)
}

// element returns the element (a div, say) that starts at the last "<tag" before the first
// occurrence of marker, through its matching end tag: the field an input sits in.
func (p *page) element(tag, open, marker string) string {
	p.t.Helper()
	at := strings.Index(p.Body, marker)
	require.GreaterOrEqual(p.t, at, 0, "no %q in\n%s", marker, p.Body)
	start := strings.LastIndex(p.Body[:at], open)
	require.GreaterOrEqual(p.t, start, 0, "no %q before %q", open, marker)
	depth := 0
	for i := start; i < len(p.Body); {
		switch {
		case strings.HasPrefix(p.Body[i:], "<"+tag):
			depth++
			i += len(tag) + 1
		case strings.HasPrefix(p.Body[i:], "</"+tag+">"):
			depth--
			i += len(tag) + 3
			if depth == 0 {
				return p.Body[start:i]
			}
		default:
			i++
		}
	}
	p.t.Fatalf("no end of the %s around %q", tag, marker)
	return ""
}

// field returns the form field (its <div class="field">) whose input has id.
func (p *page) field(id string) string {
	p.t.Helper()
	return p.element("div", `<div class="field">`, `id="`+id+`"`)
}

// text is s as html/template writes it in text: the characters it escapes, escaped.
func text(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;", "+", "&#43;", "\x00", "\uFFFD").Replace(s)
}

// endpointPath is the portal's path of endpoint id, and of what is under it (rest).
func endpointPath(id string, rest ...string) string {
	return prefix + "/endpoints/" + id + strings.Join(rest, "")
}
