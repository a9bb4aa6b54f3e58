package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// newEndpointsAPI serves the endpoint lifecycle as the reference server does — producer's
// EndpointsHandler on an in-memory registry, its mutations behind the idempotency middleware (without
// a Sealer, so a replayed secret's body is omitted) — under /v1, for testKey's licensee.
func newEndpointsAPI(t *testing.T) string {
	t.Helper()
	h, err := producer.NewEndpointsHandler(&memstore.Endpoints{}, func(r *http.Request) (string, error) {
		if r.Header.Get("Authorization") != "Bearer "+testKey {
			return "", apierror.Unauthenticated("invalid_api_key", "the API key is not valid")
		}
		return "lic_test", nil
	}, &producer.EndpointsHandlerOptions{
		EventTypes: []producer.EventType{
			{Type: "order.created", Description: "An order was created."},
			{Type: "order.filled", Description: "An order was filled.", Schema: "#/components/schemas/Order"},
		},
		URLPolicy:   func(*http.Request) ssrf.URLPolicy { return ssrf.URLPolicy{AllowHTTP: true} },
		APIVersion:  func(*http.Request) string { return "v1" },
		APIVersions: func() []string { return []string{"v1", "v2"} },
	})
	require.NoError(t, err)
	idem, err := idempotency.New(nil)
	require.NoError(t, err)
	mux := http.NewServeMux()
	h.Register(mux, "v1", idem.Handler)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

var createdID = regexp.MustCompile(`webhook endpoint (we_[A-Za-z0-9_-]+) created`)

// TestEndpointsLifecycle drives one endpoint through every command, against the real handler.
func TestEndpointsLifecycle(t *testing.T) {
	vars := map[string]string{envAPIKey: testKey, envBaseURL: newEndpointsAPI(t)}

	r := runSvc(t, vars, "", "endpoints", "create", "--url", "https://hooks.example/a", "--description", "orders to the ledger",
		"--events", "order.created", "--metadata", "team=payments", "--header", "X-Team=pay")
	require.Equal(t, exitOK, r.code, r.stderr)
	m := createdID.FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	id := m[1]
	for _, want := range []string{"url          https://hooks.example/a", "description  orders to the ledger", "events       order.created",
		"metadata     team=payments", "headers      X-Team: pay", "status       enabled", "(shown once: keep it as SVC_WEBHOOK_SECRET)"} {
		require.Contains(t, r.stdout, want)
	}
	require.Regexp(t, `secret +whsec_`, r.stdout)
	vars[envEndpoint] = id // the default endpoint of every command below

	t.Run("get: the settings, without the secret", func(t *testing.T) {
		r := runSvc(t, vars, "", "endpoints", "get")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.True(t, strings.HasPrefix(r.stdout, "webhook endpoint "+id+"\n"), r.stdout)
		for _, want := range []string{"api version  v1", "status       enabled", "events       order.created", "headers      X-Team: pay",
			"created      " + time.Now().UTC().Format("2006-")} {
			require.Contains(t, r.stdout, want)
		}
		require.NotContains(t, r.stdout, "whsec_")
		require.NotContains(t, r.stdout, "previous secret")

		r = runSvc(t, vars, "", "endpoints", "get", "--endpoint", id, "--json")
		require.Equal(t, exitOK, r.code, r.stderr)
		var ep map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &ep))
		require.Equal(t, "webhook_endpoint", ep["object"])
		require.Equal(t, []any{"order.created"}, ep["enabled_events"])
		require.NotContains(t, ep, "secret")
	})
	t.Run("update sends only what is given; KEY= removes a pair", func(t *testing.T) {
		r := runSvc(t, vars, "", "endpoints", "update", "--url", "https://hooks.example/b", "--events", "*", "--description", "",
			"--metadata", "team=", "--metadata", "env=prod", "--endpoint-api-version", "v2")
		require.Equal(t, exitOK, r.code, r.stderr)
		for _, want := range []string{"webhook endpoint " + id + " updated\n", "url          https://hooks.example/b", "api version  v2",
			"events       * (every type)", "description  none", "metadata     env=prod", "headers      X-Team: pay"} {
			require.Contains(t, r.stdout, want)
		}
		require.NotContains(t, r.stdout, "team=")

		r = runSvc(t, vars, "", "endpoints", "update", "--header", "X-Team=", "--header", "X-Env=prod", "--metadata", "a=1")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "headers      X-Env: prod\n")
		require.Contains(t, r.stdout, "metadata     a=1\n               env=prod\n")
		require.Contains(t, r.stdout, "url          https://hooks.example/b", "what was not given stays")
		require.Contains(t, r.stdout, "rate limit   none\n")

		r = runSvc(t, vars, "", "endpoints", "update", "--rate-limit", "5")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "rate limit   5 deliveries a second\n")
		r = runSvc(t, vars, "", "endpoints", "update", "--rate-limit", "none")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "rate limit   none\n")
	})
	t.Run("disable and enable", func(t *testing.T) {
		r := runSvc(t, vars, "", "endpoints", "disable")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "webhook endpoint "+id+" disabled: nothing is delivered until 'svc endpoints enable'")
		require.Regexp(t, `status +disabled \(manual, since \d{4}-\d\d-\d\dT`, r.stdout)
		r = runSvc(t, vars, "", "endpoints", "get")
		require.Contains(t, r.stdout, "disabled (manual, since ")

		r = runSvc(t, vars, "", "endpoints", "enable")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "webhook endpoint "+id+" enabled: deliveries resume")
		require.Contains(t, r.stdout, "status       enabled\n")
	})
	t.Run("roll-secret: the new secret once, the old one signing until it expires", func(t *testing.T) {
		r := runSvc(t, vars, "", "endpoints", "roll-secret", "--expires-in", "1h")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "webhook endpoint "+id+": secret rolled\n")
		require.Regexp(t, `secret +whsec_\S+ +\(shown once: keep it as SVC_WEBHOOK_SECRET\)`, r.stdout)
		until := regexp.MustCompile(`old secret +signs too until (\S+) +\(until then deliveries and range pages carry both signatures`).FindStringSubmatch(r.stdout)
		require.NotNil(t, until, r.stdout)
		at, err := time.Parse(time.RFC3339, until[1])
		require.NoError(t, err)
		require.WithinDuration(t, time.Now().Add(time.Hour), at, time.Minute)

		r = runSvc(t, vars, "", "endpoints", "get")
		require.Contains(t, r.stdout, "previous secret  signs too until "+until[1])

		r = runSvc(t, vars, "", "endpoints", "roll-secret", "--export")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Regexp(t, `^export SVC_WEBHOOK_SECRET='whsec_[A-Za-z0-9_-]+'\n$`, r.stdout)

		r = runSvc(t, vars, "", "endpoints", "roll-secret", "--expires-in", "0s")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Regexp(t, `old secret +no longer signs`, r.stdout)
		r = runSvc(t, vars, "", "endpoints", "get")
		require.NotContains(t, r.stdout, "previous secret")

		r = runSvc(t, vars, "", "endpoints", "roll-secret", "--json")
		require.Equal(t, exitOK, r.code, r.stderr)
		var ep map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &ep))
		require.Contains(t, ep["secret"], "whsec_")
		require.NotNil(t, ep["previous_secret_expires_at"], "the server's default expiry")
	})
	t.Run("delete, after which the endpoint is a 404", func(t *testing.T) {
		r := runSvc(t, vars, "", "endpoints", "delete")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "webhook endpoint "+id+" deleted: no more events or deliveries; the events it has stay readable by range")

		r = runSvc(t, vars, "", "endpoints", "get")
		require.Equal(t, exitRefused, r.code)
		require.Contains(t, r.stderr, "svc: GET "+vars[envBaseURL]+"/v1/webhook_endpoints/"+id+": 404 Not Found (webhook_endpoint_not_found)")
		require.Contains(t, r.stderr, `no webhook endpoint "`+id+`"`)
		require.Empty(t, r.stdout)
	})
}

func TestEventTypes(t *testing.T) {
	vars := map[string]string{envAPIKey: testKey, envBaseURL: newEndpointsAPI(t)}
	r := runSvc(t, vars, "", "event-types")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "TYPE           DESCRIPTION\norder.created  An order was created.\norder.filled   An order was filled.\n", r.stdout)

	r = runSvc(t, vars, "", "event-types", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			Type, Schema string
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Equal(t, "list", list.Object)
	require.Len(t, list.Data, 2)
	require.Equal(t, "#/components/schemas/Order", list.Data[1].Schema)

	r = runSvc(t, map[string]string{envAPIKey: "sk_sandbox_wrong", envBaseURL: vars[envBaseURL]}, "", "event-types")
	require.Equal(t, exitRefused, r.code)
	require.Contains(t, r.stderr, "401 Unauthorized (invalid_api_key)")
}

// Mistakes on the command line are refused before any request.
func TestEndpointsUsageErrors(t *testing.T) {
	var requests atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusTeapot)
	}))
	defer api.Close()
	vars := map[string]string{envAPIKey: testKey, envBaseURL: api.URL, envEndpoint: "we_default"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"get: an ID that is not one", []string{"endpoints", "get", "--endpoint", "we_../../orders"}, "is not a webhook endpoint ID"},
		{"delete: an ID that is not one", []string{"endpoints", "delete", "--endpoint", "orders"}, "is not a webhook endpoint ID"},
		{"update with nothing to change", []string{"endpoints", "update"}, "nothing to change: give --url, --description, --events"},
		{"--metadata without =", []string{"endpoints", "update", "--metadata", "team"}, "want NAME=VALUE (or NAME= to remove NAME)"},
		{"--metadata without a key", []string{"endpoints", "update", "--metadata", "=x"}, "the name is empty"},
		{"a header given twice, in another case", []string{"endpoints", "update", "--header", "X-A=1", "--header", "x-a=2"}, `"x-a" is given twice`},
		{"--events without a type", []string{"endpoints", "update", "--events", " , "}, "--events needs at least one event type"},
		{"--rate-limit 0", []string{"endpoints", "update", "--rate-limit", "0"}, "--rate-limit wants a number of deliveries a second of at least 1, or 'none'"},
		{"--rate-limit not a number", []string{"endpoints", "update", "--rate-limit", "fast"}, "--rate-limit wants a number"},
		{"create: removing from a new endpoint", []string{"endpoints", "create", "--url", "https://hooks.example/a", "--metadata", "team="},
			"--metadata team= removes team, and a new endpoint has none to remove"},
		{"roll-secret: a negative --expires-in", []string{"endpoints", "roll-secret", "--expires-in", "-1h"}, "--expires-in -1h0m0s must be whole seconds, 0s or more"},
		{"roll-secret: a fraction of a second", []string{"endpoints", "roll-secret", "--expires-in", "1500ms"}, "must be whole seconds"},
		{"roll-secret: not a duration", []string{"endpoints", "roll-secret", "--expires-in", "1d"}, `invalid value "1d" for flag -expires-in`},
		{"event-types takes no argument", []string{"event-types", "order.created"}, `unexpected argument "order.created"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runSvc(t, vars, "", tc.args...)
			require.Equal(t, exitUsage, r.code, r.stderr)
			require.Contains(t, r.stderr, tc.want)
		})
	}
	require.Zero(t, requests.Load())

	r := runSvc(t, map[string]string{envAPIKey: testKey, envBaseURL: api.URL}, "", "endpoints", "get")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "--endpoint is required (or set SVC_ENDPOINT)")
}

// The server's refusals are shown as their problem, located, with exit status 3.
func TestEndpointsProblems(t *testing.T) {
	vars := map[string]string{envAPIKey: testKey, envBaseURL: newEndpointsAPI(t)}
	r := runSvc(t, vars, "", "endpoints", "create", "--url", "https://hooks.example/a")
	require.Equal(t, exitOK, r.code, r.stderr)
	vars[envEndpoint] = createdID.FindStringSubmatch(r.stdout)[1]
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"an unknown endpoint", []string{"endpoints", "update", "--endpoint", "we_nope", "--description", "x"},
			[]string{"PATCH", "/v1/webhook_endpoints/we_nope: 404 Not Found (webhook_endpoint_not_found)", `no webhook endpoint "we_nope"`}},
		{"an event type the catalogue does not declare", []string{"endpoints", "update", "--events", "order.created,order.lost"},
			[]string{"400 Bad Request", "body /enabled_events/1: no event type of this name exists", "(unknown_event_type)"}},
		{"a version the server does not serve", []string{"endpoints", "update", "--endpoint-api-version", "v9"},
			[]string{"body /api_version: must be one of the supported versions: v1, v2 (unsupported_api_version)"}},
		{"an expiry past the longest", []string{"endpoints", "roll-secret", "--expires-in", "200h"},
			[]string{"body /expires_in: must be between 0", "(invalid_setting)"}},
		{"a header the platform sets itself", []string{"endpoints", "update", "--header", "X-SVC-Signature=x"},
			[]string{"body /headers/X-SVC-Signature"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runSvc(t, vars, "", tc.args...)
			require.Equal(t, exitRefused, r.code, r.stderr)
			for _, w := range tc.want {
				require.Contains(t, r.stderr, w)
			}
			require.Empty(t, r.stdout)
			require.NotContains(t, r.stderr, "send it again with --idempotency-key", "a refusal is final")
		})
	}
}

// The same Idempotency-Key replays the first answer: the change is not made twice. A replayed roll
// whose secret the server did not keep says so, and what rolling again would cost.
func TestEndpointsReplay(t *testing.T) {
	vars := map[string]string{envAPIKey: testKey, envBaseURL: newEndpointsAPI(t)}
	r := runSvc(t, vars, "", "endpoints", "create", "--url", "https://hooks.example/a")
	require.Equal(t, exitOK, r.code, r.stderr)
	id := createdID.FindStringSubmatch(r.stdout)[1]
	vars[envEndpoint] = id

	const key = "7d3c6e58-update-once"
	r = runSvc(t, vars, "", "endpoints", "update", "--description", "first", "--idempotency-key", key)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NotContains(t, r.stdout, "replayed")
	r = runSvc(t, vars, "", "endpoints", "update", "--description", "first", "--idempotency-key", key)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "webhook endpoint "+id+" updated (replayed: this key was used before; nothing was done a second time)")
	require.Contains(t, r.stdout, "description  first")

	r = runSvc(t, vars, "", "endpoints", "roll-secret", "--idempotency-key", "roll-once")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = runSvc(t, vars, "", "endpoints", "roll-secret", "--idempotency-key", "roll-once")
	require.NotEqual(t, exitOK, r.code)
	require.Contains(t, r.stderr, "the secret of "+id+" was rolled by the first request with Idempotency-Key roll-once, but the server does not keep answers that carry a secret")
	require.Empty(t, r.stdout)
}
