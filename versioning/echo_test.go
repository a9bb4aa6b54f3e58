package versioning_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/versioning"
)

// Credential-shaped values a client may paste anywhere: a live and a sandbox API key and a webhook
// signing secret.
var credentials = []string{
	"sk_live_4eC39HqLyjWDarjtT1zdp7dc",
	"sk_sandbox_9aZq83LmPpQrStUvWx12yz",
	"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
}

// requireNoCredential fails when any response header or the body repeats a credential-shaped value,
// as sent or percent-decoded.
func requireNoCredential(t *testing.T, w *httptest.ResponseRecorder, secret string) {
	t.Helper()
	for k, vs := range w.Header() {
		for _, v := range vs {
			dec, _ := url.PathUnescape(v)
			require.False(t, strings.Contains(v, secret) || strings.Contains(dec, secret), "header %s: %s", k, v)
			require.False(t, apierror.LooksLikeCredential(dec), "header %s: %s", k, v)
		}
	}
	require.NotContains(t, w.Body.String(), secret)
}

// D10, issue 30: the successor-version link is built from the request's path, so a key pasted into a
// path came back in Link. No response of the router repeats a credential-shaped value, whatever
// part of the request carries it; the announcement itself (Deprecation, Sunset) stays.
func TestRouterEchoesNoCredential(t *testing.T) {
	reg := fixtureRegistry(t)
	now := func() time.Time { return testNow }
	for _, secret := range credentials {
		escaped := strings.ReplaceAll(secret, "_", "%5F")
		cases := []struct {
			name, target string
			header       http.Header
			body         string
			wrap         func(http.Handler) http.Handler
			hook         func(*http.Request, string) string
			wantLink     bool
		}{
			{name: "path segment", target: "/v1/orders/" + secret},
			{name: "escaped path segment", target: "/v1/orders/" + escaped},
			{name: "first of several segments", target: "/v1/" + secret + "/orders"},
			{name: "prefix stripped outside", target: "/" + secret + "/v1/orders",
				wrap: func(h http.Handler) http.Handler { return http.StripPrefix("/"+secret, h) }},
			{name: "hook building from the path", target: "/v1/orders/" + secret,
				hook: func(r *http.Request, successor string) string {
					return "https://api.example.com/" + successor + strings.TrimPrefix(r.URL.Path, "/v1")
				}},
			{name: "query", target: "/v1/orders?key=" + secret, wantLink: true},
			{name: "header", target: "/v1/orders", header: http.Header{"Authorization": {"Bearer " + secret}, "X-Request-Id": {secret}}, wantLink: true},
			{name: "body", target: "/v1/orders", body: `{"key":"` + secret + `"}`, wantLink: true},
			{name: "unknown version", target: "/" + secret + "/orders"},
		}
		for _, tc := range cases {
			t.Run(secret[:6]+"/"+tc.name, func(t *testing.T) {
				rt := must(versioning.New(reg, &versioning.Options{Now: now, SuccessorLink: tc.hook}))
				var h http.Handler = apierror.WithRequestID(rt.Handler(http.NotFoundHandler()))
				if tc.wrap != nil {
					h = tc.wrap(h)
				}
				method := http.MethodGet
				if tc.body != "" {
					method = http.MethodPost
				}
				r := httptest.NewRequest(method, tc.target, strings.NewReader(tc.body))
				for k, vs := range tc.header {
					r.Header[k] = vs
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				requireNoCredential(t, w, secret)
				if tc.name == "unknown version" {
					require.Equal(t, http.StatusNotFound, w.Code)
					return
				}
				require.NotEmpty(t, w.Header().Get("Deprecation"), "the deprecation is still announced")
				var succ []string
				for _, l := range w.Header().Values("Link") {
					if strings.Contains(l, `rel="successor-version"`) {
						succ = append(succ, l)
					}
				}
				if tc.wantLink {
					require.Equal(t, []string{`</v2/orders>; rel="successor-version"`}, succ)
				} else {
					require.Empty(t, succ, "no link rather than a link that carries the credential")
				}
			})
		}
	}
}
