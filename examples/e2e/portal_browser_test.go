package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/examples/internal/browser"
	"github.com/svcplatform/conventions/examples/internal/testenv"
	"github.com/svcplatform/conventions/webhook"
)

// The tests in this file use the webhook portal as a person would: in a real headless Chromium,
// against the reference server on PostgreSQL, every form worked with the keyboard alone, every
// screen checked with axe-core (no serious or critical violation) and photographed at 1280×800 and
// 390×844, and the main ones in the dark colour scheme too (browser.Screenshot: the files are kept
// out of git).

// consumerSink is a webhook consumer that answers 200 and keeps what it got.
type consumerSink struct {
	mu    sync.Mutex
	got   []sunk
	srv   *httptest.Server
	count map[string]int // deliveries by X-SVC-Sequence
}

type sunk struct {
	sig, seq, redelivery string
	body                 []byte
}

func newConsumerSink(t *testing.T) *consumerSink {
	c := &consumerSink{count: map[string]int{}}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		s := sunk{sig: r.Header.Get(webhook.HeaderSignature), seq: r.Header.Get(webhook.HeaderSequence),
			redelivery: r.Header.Get(webhook.HeaderRedelivery), body: body}
		c.got = append(c.got, s)
		c.count[s.seq]++
		c.mu.Unlock()
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *consumerSink) deliveries() []sunk {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]sunk(nil), c.got...)
}

func (c *consumerSink) of(seq string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count[seq]
}

// shot checks the page in ctx with axe-core and photographs it.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	browser.CheckAxe(t, ctx, name)
	browser.Screenshot(t, ctx, name)
}

// count returns how many elements match selector in the page.
func count(t *testing.T, ctx context.Context, selector string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(selector)+`).length`))
	require.NoError(t, err)
	return n
}

// value returns the value of the input selector names.
func value(t *testing.T, ctx context.Context, selector string) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Value(selector))
	require.NoError(t, err)
	return v
}

// typeInto focuses the field selector names with the Tab key alone and types keys into it.
func typeInto(t *testing.T, ctx context.Context, selector, keys string) {
	t.Helper()
	require.NoError(t, browser.TabTo(ctx, selector, 60))
	browser.Type(t, ctx, keys)
}

// keyboardSubmit submits with the button selector names, reached with Tab and pressed with Enter,
// and returns the status of the page it leads to.
func keyboardSubmit(t *testing.T, ctx context.Context, selector string) int {
	t.Helper()
	return browser.KeyboardSubmit(t, ctx, selector, 80)
}

func TestPortalInBrowser(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	b := browser.Start(t)
	srv := startOrderServerEnv(t, "orderserver-pg", []string{loopbackAllow, postgresEnv(dsn)})
	sk := srv.SandboxKey
	sink := newConsumerSink(t)
	ctx := b.Tab(t, browser.Laptop())
	portal := srv.URL + "/portal"

	// The link the API mints opens the portal; its button, pressed with Enter, spends it.
	link := portalLink(t, srv.URL, sk)
	require.Equal(t, http.StatusOK, browser.Navigate(t, ctx, link))
	shot(t, ctx, "login")
	require.Equal(t, http.StatusOK, keyboardSubmit(t, ctx, `button[type=submit]`))
	require.Contains(t, browser.Text(t, ctx, "h1"), "Webhook endpoints")
	require.Equal(t, "sandbox", strings.ToLower(browser.Text(t, ctx, ".env")), "the environment, in capitals by its style")
	shot(t, ctx, "endpoints-empty")

	// Register an endpoint subscribed to one event type, by keyboard alone.
	typeInto(t, ctx, "#f-url", sink.srv.URL+"/hooks")
	typeInto(t, ctx, "#f-description", "Orders consumer")
	typeInto(t, ctx, `input[name=event][value="*"]`, " ")             // untick every event type
	typeInto(t, ctx, `input[name=event][value="order.created"]`, " ") // tick order.created
	require.Equal(t, http.StatusCreated, keyboardSubmit(t, ctx, `form[action="/portal/endpoints"] button[type=submit]`))
	require.Contains(t, browser.Text(t, ctx, "h1"), "Endpoint registered")
	secret := value(t, ctx, "#secret")
	require.True(t, strings.HasPrefix(secret, "whsec_"), secret)
	shot(t, ctx, "secret")

	eps := request{Method: "GET", URL: srv.URL + "/v1/webhook_endpoints", Auth: bearer(sk)}.do(t).expectJSON(t, http.StatusOK)["data"].([]any)
	require.Len(t, eps, 1)
	ep := eps[0].(map[string]any)
	id := ep["id"].(string)
	require.Equal(t, []any{"order.created"}, ep["enabled_events"], "the one event type ticked")
	epURL := portal + "/endpoints/" + id

	// Orders created through the API are delivered, signed with the secret the page showed, and the
	// deliveries appear on the page.
	for i := range 3 {
		request{Method: "POST", URL: srv.URL + "/v1/orders", Auth: bearer(sk), Key: newKey(),
			Body: `{"account":"acc_` + strconv.Itoa(i) + `","side":"buy"}`}.do(t).expectJSON(t, http.StatusCreated)
	}
	eventually(t, deliveryTimeout, func() bool { return len(sink.deliveries()) >= 3 }, "three deliveries")
	v, err := webhook.NewVerifier([]string{secret}, nil)
	require.NoError(t, err)
	for _, d := range sink.deliveries() {
		require.NoError(t, v.Verify(d.sig, d.body), "signed with the secret the portal revealed")
	}
	eventually(t, deliveryTimeout, func() bool {
		browser.Navigate(t, ctx, epURL+"/deliveries")
		return count(t, ctx, "table.attempts tbody tr") == 3
	}, "three attempts on the deliveries page")
	require.Equal(t, 3, count(t, ctx, ".badge-delivered"))
	shot(t, ctx, "deliveries")

	// The endpoint's page: the day's success as a sparkline.
	require.Equal(t, http.StatusOK, browser.Navigate(t, ctx, epURL))
	require.Equal(t, 1, count(t, ctx, "svg.spark path.spark-line"), "the sparkline has a line")
	require.Contains(t, browser.Text(t, ctx, ".stats"), "100.0%")
	shot(t, ctx, "endpoint")

	// One event: its JSON, its headers, and resend.
	require.Equal(t, http.StatusOK, browser.Navigate(t, ctx, epURL+"/events/1"))
	require.Contains(t, browser.Text(t, ctx, `section[aria-labelledby="body"] pre`), `"type": "order.created"`)
	shot(t, ctx, "event")
	require.Equal(t, http.StatusOK, keyboardSubmit(t, ctx, `form[action$="/resend"] button`))
	require.Contains(t, browser.Text(t, ctx, ".notice"), "queued to be sent again")
	eventually(t, deliveryTimeout, func() bool { return sink.of("1") == 2 }, "event 1 delivered again")

	// Roll the secret: the new one shown once, the old one's expiry said.
	require.Equal(t, http.StatusOK, browser.Navigate(t, ctx, epURL))
	require.Equal(t, http.StatusOK, keyboardSubmit(t, ctx, `form[action$="/roll"] button`))
	require.Contains(t, browser.Text(t, ctx, "h1"), "New signing secret")
	rolled := value(t, ctx, "#secret")
	require.NotEqual(t, secret, rolled)
	require.Contains(t, browser.Text(t, ctx, "main"), "The previous secret keeps signing too until")
	shot(t, ctx, "rolled")
	browser.Navigate(t, ctx, epURL)
	require.Contains(t, browser.Text(t, ctx, ".facts"), "signs too until")

	// Disable, then enable again.
	require.Equal(t, http.StatusOK, keyboardSubmit(t, ctx, `form[action$="/status"] button`))
	require.Equal(t, "disabled", browser.Text(t, ctx, ".facts .badge"))
	require.Contains(t, browser.Text(t, ctx, ".notice"), "The endpoint is disabled")
	require.Equal(t, http.StatusOK, keyboardSubmit(t, ctx, `form[action$="/status"] button`))
	require.Equal(t, "enabled", browser.Text(t, ctx, ".facts .badge"))

	// A fault rate the API refuses is shown next to its field.
	typeInto(t, ctx, "#f-drop", "2")
	require.Equal(t, http.StatusBadRequest, keyboardSubmit(t, ctx, `button[name=action][value=set]`))
	require.Contains(t, browser.Text(t, ctx, "#e-drop"), "must be a rate between 0 and 1")
	shot(t, ctx, "faults-refused")
	// And a test event, by keyboard.
	browser.Navigate(t, ctx, epURL)
	require.Equal(t, http.StatusOK, keyboardSubmit(t, ctx, `form[action$="/test_event"] button`))
	require.Contains(t, browser.Text(t, ctx, ".notice"), "test event is on its way")

	// Recover a range.
	require.Equal(t, http.StatusOK, browser.Navigate(t, ctx, epURL+"/recover"))
	shot(t, ctx, "recover")
	typeInto(t, ctx, "#f-from", "1")
	typeInto(t, ctx, "#f-to", "3")
	require.Equal(t, http.StatusOK, keyboardSubmit(t, ctx, `form[action$="/recover"] button`))
	require.Contains(t, browser.Text(t, ctx, ".notice"), "events are queued to be sent again")
	eventually(t, deliveryTimeout, func() bool { return sink.of("3") == 2 }, "event 3 recovered")

	// The catalogue.
	require.Equal(t, http.StatusOK, browser.Navigate(t, ctx, portal+"/event_types"))
	require.Contains(t, browser.Text(t, ctx, "table"), "order.created")
	shot(t, ctx, "event-types")

	// Delete a second endpoint, confirmed by keyboard.
	other := request{Method: "POST", URL: srv.URL + "/v1/webhook_endpoints", Auth: bearer(sk), Key: newKey(),
		Body: `{"url":"http://127.0.0.1:9/old","description":"Old consumer"}`}.do(t).expectJSON(t, http.StatusCreated)
	require.Equal(t, http.StatusOK, browser.Navigate(t, ctx, portal+"/endpoints/"+other["id"].(string)+"/delete"))
	shot(t, ctx, "delete")
	require.Equal(t, http.StatusOK, keyboardSubmit(t, ctx, `button.danger`))
	require.Contains(t, browser.Text(t, ctx, ".notice"), "The endpoint was deleted")
	require.NotContains(t, browser.Text(t, ctx, "main"), "Old consumer")
	require.Contains(t, browser.Text(t, ctx, "main"), "Orders consumer")
	shot(t, ctx, "endpoints")

	t.Run("at 390×844", func(t *testing.T) {
		phone := b.Tab(t, browser.Phone()) // the same browser: the same session
		for _, page := range []struct{ name, url string }{
			{"endpoints", portal + "/endpoints"}, {"endpoint", epURL}, {"deliveries", epURL + "/deliveries"},
			{"event", epURL + "/events/1"}, {"recover", epURL + "/recover"}, {"event-types", portal + "/event_types"},
			{"delete", epURL + "/delete"},
		} {
			require.Equal(t, http.StatusOK, browser.Navigate(t, phone, page.url), page.name)
			shot(t, phone, page.name)
		}
		require.Equal(t, http.StatusOK, browser.Navigate(t, phone, epURL))
		require.Equal(t, http.StatusOK, keyboardSubmit(t, phone, `form[action$="/roll"] button`))
		shot(t, phone, "rolled")
		require.Equal(t, http.StatusOK, browser.Navigate(t, phone, portalLink(t, srv.URL, sk)))
		shot(t, phone, "login")
	})

	t.Run("dark", func(t *testing.T) {
		dark := b.Tab(t, browser.Viewport{Width: 1280, Height: 800, Scale: 1, Dark: true})
		for _, page := range []struct{ name, url string }{
			{"endpoints", portal + "/endpoints"}, {"endpoint", epURL}, {"deliveries", epURL + "/deliveries"},
			{"event", epURL + "/events/1"},
		} {
			require.Equal(t, http.StatusOK, browser.Navigate(t, dark, page.url), page.name)
			shot(t, dark, page.name) // axe checks the contrast of the dark colours too
		}
	})

	t.Run("another licensee's link shows none of it", func(t *testing.T) {
		b2 := browser.Start(t)
		ctx2 := b2.Tab(t, browser.Laptop())
		require.Equal(t, http.StatusOK, browser.Navigate(t, ctx2, portalLink(t, srv.URL, issueCredentials(t, srv))))
		require.Equal(t, http.StatusOK, keyboardSubmit(t, ctx2, `button[type=submit]`))
		require.Contains(t, browser.Text(t, ctx2, "main"), "No endpoints yet")
		require.NotContains(t, browser.Text(t, ctx2, "main"), "Orders consumer")
		require.Equal(t, http.StatusNotFound, browser.Navigate(t, ctx2, epURL))
		require.NotContains(t, browser.Text(t, ctx2, "main"), "Orders consumer")
		shot(t, ctx2, "not-found")
	})

	t.Run("an expired link is refused", func(t *testing.T) {
		link := portalLink(t, srv.URL, sk)
		u, err := url.Parse(link)
		require.NoError(t, err)
		// Ten minutes pass: the row's expiry is moved into the past rather than waited for.
		sum := sha256.Sum256([]byte("link\x00" + u.Query().Get("token")))
		dbctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(dbctx, dsn)
		require.NoError(t, err)
		defer conn.Close(dbctx)
		tag, err := conn.Exec(dbctx, "UPDATE portal_sessions SET expires_at = now() - interval '1 second' WHERE key = $1",
			hex.EncodeToString(sum[:]))
		require.NoError(t, err)
		require.EqualValues(t, 1, tag.RowsAffected(), "the link's row, found by the hash of its token")

		b3 := browser.Start(t)
		ctx3 := b3.Tab(t, browser.Laptop())
		require.Equal(t, http.StatusGone, browser.Navigate(t, ctx3, link))
		require.Contains(t, browser.Text(t, ctx3, "h1"), "This link has expired or was used")
		shot(t, ctx3, "link-expired")
	})

	t.Run("signing out by keyboard ends the session", func(t *testing.T) {
		browser.Navigate(t, ctx, portal+"/endpoints")
		require.Equal(t, http.StatusOK, keyboardSubmit(t, ctx, `form[action$="/logout"] button`))
		require.Contains(t, browser.Text(t, ctx, "h1"), "You are signed out")
		require.Equal(t, http.StatusUnauthorized, browser.Navigate(t, ctx, portal+"/endpoints"))
	})
}
