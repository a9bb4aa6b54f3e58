package apierror_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
)

// Credential-shaped values a client may paste anywhere: a live and a sandbox API key and a webhook
// signing secret.
var credentials = []string{
	"sk_live_4eC39HqLyjWDarjtT1zdp7dc",
	"sk_sandbox_9aZq83LmPpQrStUvWx12yz",
	"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
}

// D10, issue 30: no problem the Writer renders, and no line it logs, repeats a credential-shaped value
// the client sent, wherever in the request it was (path, query, header, body) and wherever the
// problem carries it (title, detail, instance, a violation's pointer, name or detail, an extension
// member), and the problem still conforms (Check).
func TestWriterEchoesNoCredential(t *testing.T) {
	type dst struct {
		Account string `json:"account"`
	}
	for _, secret := range credentials {
		cases := []struct {
			name   string
			target string
			header http.Header
			body   string
			// problem builds the error from the request, as a handler would.
			problem func(r *http.Request) error
		}{
			{name: "path, in a detail", target: "/v1/webhook_endpoints/" + secret,
				problem: func(r *http.Request) error {
					id := strings.TrimPrefix(r.URL.Path, "/v1/webhook_endpoints/")
					return apierror.NotFound("webhook_endpoint_not_found", "no webhook endpoint "+id,
						apierror.Path("id", "webhook_endpoint_not_found", "no webhook endpoint "+id))
				}},
			{name: "path, in title and instance", target: "/v1/orders/" + secret,
				problem: func(r *http.Request) error {
					return &apierror.Error{Status: 404, Code: "order_not_found", Title: "No order " + r.URL.Path,
						Detail: "path id: no order of yours has this id", Instance: r.URL.Path}
				}},
			{name: "path, as a violation's name", target: "/v1/orders/x",
				problem: func(r *http.Request) error {
					return apierror.Invalid(apierror.Path(secret, "path_invalid", "is not a known parameter"))
				}},
			{name: "query, as a parameter name", target: "/v1/events?" + secret + "=%zz",
				problem: func(r *http.Request) error { _, err := apierror.ParseQuery(r); return err }},
			{name: "query, malformed name", target: "/v1/events?" + secret + "%zz=1",
				problem: func(r *http.Request) error { _, err := apierror.ParseQuery(r); return err }},
			{name: "query, in an extension member", target: "/v1/events?from=" + secret,
				problem: func(r *http.Request) error {
					return apierror.Invalid(apierror.Query("from", "query_invalid", "must be a sequence number")).
						With("got", r.URL.Query().Get("from")).
						With("nested", map[string]any{"values": []string{r.URL.Query().Get("from")}, r.URL.Query().Get("from"): 1})
				}},
			{name: "header, in a detail", target: "/v1/orders", header: http.Header{"X-Account": {secret}},
				problem: func(r *http.Request) error {
					return apierror.Invalid(apierror.Header("X-Account", "account_unknown", "no account "+r.Header.Get("X-Account")))
				}},
			{name: "header, X-Request-Id", target: "/v1/orders", header: http.Header{"X-Request-Id": {secret}},
				problem: func(r *http.Request) error { return apierror.MissingField("/account") }},
			{name: "body, an unknown member", target: "/v1/orders", body: `{"account":"acc_1","` + secret + `":1}`,
				problem: func(r *http.Request) error { var d dst; return apierror.Decode(r, &d, nil) }},
			{name: "body, a member of the wrong type", target: "/v1/orders", body: `{"account":{"` + secret + `":1}}`,
				problem: func(r *http.Request) error { var d map[string]dst; return apierror.Decode(r, &d, nil) }},
			{name: "body, an unknown nested member", target: "/v1/orders", body: `{"` + secret + `":{"x":1}}`,
				problem: func(r *http.Request) error { var d map[string]dst; return apierror.Decode(r, &d, nil) }},
			{name: "body, in an error that becomes the opaque 500", target: "/v1/orders", body: secret,
				problem: func(r *http.Request) error {
					var b bytes.Buffer
					_, _ = b.ReadFrom(r.Body)
					return fmt.Errorf("orders: looking up %q: %w", b.String(), errors.New("boom"))
				}},
		}
		for _, tc := range cases {
			t.Run(secret[:6]+"/"+tc.name, func(t *testing.T) {
				var logs bytes.Buffer
				wr := apierror.Writer{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
				h := apierror.WithRequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					err := tc.problem(r)
					require.Error(t, err)
					wr.Write(w, r, err)
				}))
				method := http.MethodGet
				if tc.body != "" {
					method = http.MethodPost
				}
				r := httptest.NewRequest(method, tc.target, strings.NewReader(tc.body))
				if tc.body != "" {
					r.Header.Set("Content-Type", "application/json")
				}
				for k, vs := range tc.header {
					r.Header[k] = vs
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				require.GreaterOrEqual(t, w.Code, 400)
				require.NotContains(t, w.Body.String(), secret)
				require.False(t, apierror.LooksLikeCredential(w.Body.String()), w.Body.String())
				for k, vs := range w.Header() {
					for _, v := range vs {
						require.False(t, apierror.LooksLikeCredential(v), "header %s: %s", k, v)
					}
				}
				require.NotContains(t, logs.String(), secret)
				require.NoError(t, apierror.Check(w.Code, w.Header(), w.Body.Bytes()), w.Body.String())
			})
		}
	}
}
