package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/internal/syncbuf"
	"github.com/svcplatform/conventions/webhook"
)

// controlsApp is an application with the controls mounted behind the Authenticator, hooks that record
// their calls, and the shared not-found handler for unknown routes.
type controlsApp struct {
	h      http.Handler
	iss    *apikey.Issuer
	mu     sync.Mutex
	calls  []string
	trig   []TriggerRequest
	faults map[string]Faults
	resets []apikey.Principal
	fail   error
}

func newControlsApp(t *testing.T, hooks *Hooks) *controlsApp {
	t.Helper()
	a := &controlsApp{iss: must(apikey.NewIssuer(nil, nil)), faults: map[string]Faults{}}
	owned := map[string]bool{"we_1": true, "we_2": true}
	if hooks == nil {
		hooks = &Hooks{
			Trigger: func(ctx context.Context, p apikey.Principal, req TriggerRequest) ([]Triggered, error) {
				a.record("trigger", p)
				if a.fail != nil {
					return nil, a.fail
				}
				if req.Endpoint != "" && !owned[req.Endpoint] {
					return nil, ErrUnknownEndpoint
				}
				a.mu.Lock()
				a.trig = append(a.trig, req)
				a.mu.Unlock()
				return []Triggered{{Endpoint: "we_1", Event: webhook.Event{ID: "evt_1", Sequence: 1, Type: req.Type, Created: 1767225600, APIVersion: "v1", Data: req.Data}}}, nil
			},
			SetFaults: func(ctx context.Context, p apikey.Principal, id string, f Faults) error {
				a.record("faults", p)
				if !owned[id] {
					return ErrUnknownEndpoint
				}
				a.mu.Lock()
				a.faults[id] = f
				a.mu.Unlock()
				return nil
			},
			Reset: func(ctx context.Context, p apikey.Principal) error {
				a.record("reset", p)
				a.mu.Lock()
				a.resets = append(a.resets, p)
				a.mu.Unlock()
				return a.fail
			},
		}
	}
	notFound := apierror.Writer{}.NotFoundHandler()
	mux := http.NewServeMux()
	mux.Handle("/", notFound)
	mux.Handle("/v1/sandbox/", must(NewControls(*hooks, &ControlsOptions{NotFound: notFound})))
	mux.HandleFunc("GET /v1/orders", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	a.h = must(apikey.NewAuthenticator(a.iss, nil)).Handler(mux)
	return a
}

func (a *controlsApp) record(name string, p apikey.Principal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p.Environment != apikey.Sandbox {
		panic("a hook ran for a " + string(p.Environment) + " principal")
	}
	a.calls = append(a.calls, name)
}

func (a *controlsApp) callCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.calls)
}

// Every control, with every method, refuses a production key with exactly the response of an unknown
// route: a production caller cannot even tell the controls exist.
func TestControlsRefuseProductionKeys(t *testing.T) {
	a := newControlsApp(t, nil)
	live := issue(t, a.iss, "lic_a", apikey.Live).APIKey
	requests := []struct{ method, path, body string }{
		{http.MethodPost, "/v1/sandbox/events", `{"type":"order.created"}`},
		{http.MethodPost, "/v1/sandbox/events", ""},
		{http.MethodGet, "/v1/sandbox/events", ""},
		{http.MethodPut, "/v1/sandbox/webhook_endpoints/we_1/faults", `{"drop":1}`},
		{http.MethodDelete, "/v1/sandbox/webhook_endpoints/we_1/faults", ""},
		{http.MethodGet, "/v1/sandbox/webhook_endpoints/we_1/faults", ""},
		{http.MethodPut, "/v1/sandbox/webhook_endpoints/we_1/faults", `{"drop":7}`}, // invalid: still 404, not 400
		{http.MethodPost, "/v1/sandbox/reset", ""},
		{http.MethodDelete, "/v1/sandbox/reset", ""},
		{http.MethodPost, "/v1/sandbox/no-such-control", ""},
		{http.MethodGet, "/v1/sandbox/", ""},
	}
	for _, rq := range requests {
		t.Run(rq.method+" "+rq.path, func(t *testing.T) {
			got := do(t, a.h, rq.method, rq.path, live, rq.body)
			unknown := do(t, a.h, rq.method, "/v1/no-such-route", live, rq.body)
			require.Equal(t, http.StatusNotFound, got.Code)
			requireConforms(t, got)
			require.Equal(t, unknown.Code, got.Code)
			require.Equal(t, unknown.Header().Get("Content-Type"), got.Header().Get("Content-Type"))
			require.Empty(t, got.Header().Get("Allow"))
			require.Equal(t, withoutRequestID(t, unknown.Body.Bytes()), withoutRequestID(t, got.Body.Bytes()))
		})
	}
	require.Zero(t, a.callCount(), "no hook ran for a production key")
	require.Equal(t, http.StatusOK, do(t, a.h, http.MethodGet, "/v1/orders", live, "").Code, "the key itself works")
}

func TestControlsWithoutPrincipal(t *testing.T) {
	c := must(NewControls(Hooks{Reset: func(context.Context, apikey.Principal) error { panic("must not run") }}, nil))
	rec := do(t, c, http.MethodPost, "/v1/sandbox/reset", "", "")
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Equal(t, apierror.CodeRouteNotFound, problem(t, rec).Code)
}

// Paths a ServeMux would clean or redirect before they reach the controls, served directly.
func TestControlsOddPaths(t *testing.T) {
	c := must(NewControls(Hooks{SetFaults: func(context.Context, apikey.Principal, string, Faults) error { panic("must not run") }}, nil))
	for _, path := range []string{"/v1/sandbox/webhook_endpoints//faults", "/v1/sandbox/webhook_endpoints/faults", "/v1/sandbox", "/v1/sandboxreset", "/elsewhere"} {
		t.Run(path, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPut, path, strings.NewReader(`{"drop":0.5}`))
			r = r.WithContext(apikey.NewContext(r.Context(), apikey.Principal{Licensee: "lic_a", Environment: apikey.Sandbox}))
			rec := httptest.NewRecorder()
			c.ServeHTTP(rec, r)
			require.Equal(t, http.StatusNotFound, rec.Code)
			require.Equal(t, apierror.CodeRouteNotFound, problem(t, rec).Code)
		})
	}
}

func TestControlsTrigger(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		code     int
		pointer  string
		wantType string
		wantData string
	}{
		{"empty body means defaults", "", http.StatusCreated, "", DefaultTestEventType, `{}`},
		{"empty object", `{}`, http.StatusCreated, "", DefaultTestEventType, `{}`},
		{"type and data", `{"type":"order.created","data":{"id":"ord_1"}}`, http.StatusCreated, "", "order.created", `{"id":"ord_1"}`},
		{"one endpoint", `{"endpoint":"we_2"}`, http.StatusCreated, "", DefaultTestEventType, `{}`},
		{"null data", `{"data":null}`, http.StatusCreated, "", DefaultTestEventType, `{}`},
		{"type not dotted", `{"type":"created"}`, http.StatusBadRequest, "/type", "", ""},
		{"type with capitals", `{"type":"Order.Created"}`, http.StatusBadRequest, "/type", "", ""},
		{"type with an empty word", `{"type":"order..created"}`, http.StatusBadRequest, "/type", "", ""},
		{"data not an object", `{"data":[1,2]}`, http.StatusBadRequest, "/data", "", ""},
		{"unknown member", `{"typ":"order.created"}`, http.StatusBadRequest, "/typ", "", ""},
		{"type of the wrong kind", `{"type":7}`, http.StatusBadRequest, "/type", "", ""},
		{"malformed JSON", `{"type":`, http.StatusBadRequest, "", "", ""},
		{"not your endpoint", `{"endpoint":"we_other"}`, http.StatusNotFound, "/endpoint", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newControlsApp(t, nil)
			key := issue(t, a.iss, "lic_a", apikey.Sandbox).APIKey
			rec := do(t, a.h, http.MethodPost, "/v1/sandbox/events", key, tc.body)
			require.Equal(t, tc.code, rec.Code, rec.Body.String())
			if tc.code != http.StatusCreated {
				requireConforms(t, rec)
				p := problem(t, rec)
				require.NotEmpty(t, p.Errors)
				if tc.pointer != "" {
					require.Equal(t, tc.pointer, p.Errors[0].Pointer)
				}
				require.Empty(t, a.trig, "nothing triggered")
				return
			}
			require.Len(t, a.trig, 1)
			require.Equal(t, tc.wantType, a.trig[0].Type)
			require.JSONEq(t, tc.wantData, string(a.trig[0].Data))
			var out struct {
				Object  string      `json:"object"`
				Data    []Triggered `json:"data"`
				HasMore bool        `json:"has_more"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
			require.Equal(t, "list", out.Object)
			require.Len(t, out.Data, 1)
			require.Equal(t, tc.wantType, out.Data[0].Event.Type)
		})
	}
}

func TestControlsFaults(t *testing.T) {
	tests := []struct {
		name     string
		method   string
		path     string
		body     string
		code     int
		location string // of the first violation
		where    string // its pointer or name
		want     *Faults
	}{
		{"set", http.MethodPut, "/v1/sandbox/webhook_endpoints/we_1/faults",
			`{"drop":0.2,"duplicate":0.1,"reorder":0.1,"bad_signature":0.05,"delay_ms":0}`, http.StatusOK, "", "",
			&Faults{Drop: 0.2, Duplicate: 0.1, Reorder: 0.1, BadSignature: 0.05}},
		{"set with delay", http.MethodPut, "/v1/sandbox/webhook_endpoints/we_2/faults", `{"delay":0.5,"delay_ms":2000}`, http.StatusOK, "", "",
			&Faults{Delay: 0.5, DelayMS: 2000}},
		{"clear", http.MethodDelete, "/v1/sandbox/webhook_endpoints/we_1/faults", "", http.StatusOK, "", "", &Faults{}},
		{"rate above 1", http.MethodPut, "/v1/sandbox/webhook_endpoints/we_1/faults", `{"drop":1.2}`, http.StatusBadRequest, "body", "/drop", nil},
		{"negative rate", http.MethodPut, "/v1/sandbox/webhook_endpoints/we_1/faults", `{"bad_signature":-0.5}`, http.StatusBadRequest, "body", "/bad_signature", nil},
		{"delay too long", http.MethodPut, "/v1/sandbox/webhook_endpoints/we_1/faults", `{"delay":1,"delay_ms":3600000}`, http.StatusBadRequest, "body", "/delay_ms", nil},
		{"rate as a string", http.MethodPut, "/v1/sandbox/webhook_endpoints/we_1/faults", `{"reorder":"often"}`, http.StatusBadRequest, "body", "/reorder", nil},
		{"unknown fault", http.MethodPut, "/v1/sandbox/webhook_endpoints/we_1/faults", `{"corrupt":1}`, http.StatusBadRequest, "body", "/corrupt", nil},
		{"no body", http.MethodPut, "/v1/sandbox/webhook_endpoints/we_1/faults", "", http.StatusBadRequest, "body", "", nil},
		{"not your endpoint", http.MethodPut, "/v1/sandbox/webhook_endpoints/we_other/faults", `{"drop":0.5}`, http.StatusNotFound, "path", "id", nil},
		{"wrong method", http.MethodGet, "/v1/sandbox/webhook_endpoints/we_1/faults", "", http.StatusMethodNotAllowed, "", "", nil},
		{"nested ID", http.MethodPut, "/v1/sandbox/webhook_endpoints/we_1/x/faults", `{"drop":0.5}`, http.StatusNotFound, "path", "path", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newControlsApp(t, nil)
			key := issue(t, a.iss, "lic_a", apikey.Sandbox).APIKey
			rec := do(t, a.h, tc.method, tc.path, key, tc.body)
			require.Equal(t, tc.code, rec.Code, rec.Body.String())
			if tc.want == nil {
				requireConforms(t, rec)
				if tc.code == http.StatusMethodNotAllowed {
					require.Equal(t, "PUT, DELETE", rec.Header().Get("Allow"))
					return
				}
				p := problem(t, rec)
				require.NotEmpty(t, p.Errors)
				require.Equal(t, tc.location, string(p.Errors[0].Location))
				require.Equal(t, tc.where, p.Errors[0].Pointer+p.Errors[0].Name)
				for id, f := range a.faults {
					require.True(t, f.IsZero(), "%s changed by a refused request", id)
				}
				return
			}
			var body struct {
				Object   string `json:"object"`
				Endpoint string `json:"endpoint"`
				Faults
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
			require.Equal(t, "webhook_faults", body.Object)
			require.Equal(t, *tc.want, body.Faults)
			require.Len(t, a.faults, 1)
			for _, f := range a.faults {
				require.Equal(t, *tc.want, f)
			}
		})
	}
}

func TestControlsReset(t *testing.T) {
	a := newControlsApp(t, nil)
	key := issue(t, a.iss, "lic_a", apikey.Sandbox).APIKey
	rec := do(t, a.h, http.MethodPost, "/v1/sandbox/reset", key, "")
	require.Equal(t, http.StatusNoContent, rec.Code)
	require.Len(t, a.resets, 1)
	require.Equal(t, "lic_a", a.resets[0].Licensee)
	require.Equal(t, apikey.Sandbox, a.resets[0].Environment)

	rec = do(t, a.h, http.MethodGet, "/v1/sandbox/reset", key, "")
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	require.Equal(t, "POST", rec.Header().Get("Allow"))
	requireConforms(t, rec)
}

func TestControlsHookFailures(t *testing.T) {
	logger, logs := syncbuf.Logger()
	a := newControlsApp(t, nil)
	// The cause quotes a key, as a driver error may quote a query's argument: it is logged redacted.
	leaked := issue(t, a.iss, "lic_b", apikey.Live).APIKey
	a.fail = errors.New("database exploded at 10.0.0.7 on " + leaked)
	mux := http.NewServeMux()
	mux.Handle("/v1/sandbox/", must(NewControls(Hooks{Reset: func(ctx context.Context, p apikey.Principal) error { return a.fail }}, &ControlsOptions{Logger: logger})))
	h := must(apikey.NewAuthenticator(a.iss, nil)).Handler(mux)
	key := issue(t, a.iss, "lic_a", apikey.Sandbox).APIKey

	rec := do(t, h, http.MethodPost, "/v1/sandbox/reset", key, "")
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.NotContains(t, rec.Body.String(), "10.0.0.7", "no internal detail in a 5xx")
	require.Contains(t, logs.String(), "10.0.0.7")
	require.NotContains(t, logs.String(), leaked)

	rec = do(t, a.h, http.MethodPost, "/v1/sandbox/events", key, "")
	require.Equal(t, http.StatusInternalServerError, rec.Code)

	// Controls whose hook is nil are not there at all.
	for _, path := range []string{"/v1/sandbox/events", "/v1/sandbox/webhook_endpoints/we_1/faults"} {
		rec = do(t, h, http.MethodPost, path, key, "")
		require.Equal(t, http.StatusNotFound, rec.Code)
		require.Equal(t, apierror.CodeRouteNotFound, problem(t, rec).Code)
	}
}

func TestControlsPrefix(t *testing.T) {
	iss := must(apikey.NewIssuer(nil, nil))
	reset := 0
	h := must(apikey.NewAuthenticator(iss, nil)).Handler(must(NewControls(Hooks{Reset: func(context.Context, apikey.Principal) error { reset++; return nil }},
		&ControlsOptions{Prefix: "/sandbox-controls/"})))
	key := issue(t, iss, "lic_a", apikey.Sandbox).APIKey
	require.Equal(t, http.StatusNoContent, do(t, h, http.MethodPost, "/sandbox-controls/reset", key, "").Code)
	require.Equal(t, http.StatusNotFound, do(t, h, http.MethodPost, "/v1/sandbox/reset", key, "").Code)
	require.Equal(t, 1, reset)
}

// A trigger with a body must say it is JSON, as every body of the API must; an empty one needs no
// Content-Type.
func TestTriggerBodyMediaType(t *testing.T) {
	a := newControlsApp(t, nil)
	sb := issue(t, a.iss, "lic_a", apikey.Sandbox).APIKey
	for _, tc := range []struct {
		name, contentType, body string
		status                  int
	}{
		{"json", "application/json", `{"type":"order.created"}`, http.StatusCreated},
		{"empty body, no type", "", "", http.StatusCreated},
		{"text", "text/plain", `{"type":"order.created"}`, http.StatusUnsupportedMediaType},
		{"none", "", `{"type":"order.created"}`, http.StatusUnsupportedMediaType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v1/sandbox/events", strings.NewReader(tc.body))
			if tc.contentType != "" {
				r.Header.Set("Content-Type", tc.contentType)
			}
			r.Header.Set("Authorization", "Bearer "+sb)
			rec := httptest.NewRecorder()
			apierror.WithRequestID(a.h).ServeHTTP(rec, r)
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
			if tc.status == http.StatusUnsupportedMediaType {
				require.Equal(t, "application/json", rec.Header().Get("Accept-Post"))
				require.NoError(t, apierror.CheckResponse(rec.Result()))
			}
		})
	}
}
