package versioning_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/versioning"

	"github.com/svcplatform/conventions/internal/testclock"
)

// The fixture's lifecycle: v1 is deprecated and will be sunset; v2's deprecation is announced but
// not yet in force at testNow; v3 is the newest.
var (
	v1Released   = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	v1Deprecated = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	v1Sunset     = time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	v2Released   = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	v2Deprecated = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	v2Sunset     = time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	v3Released   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	testNow      = time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
)

const upgradeGuide = "https://docs.svcplatform.dev/upgrade/v2"

func fixtureVersions() []versioning.Version {
	return []versioning.Version{
		{Name: "v3", Released: v3Released},
		{Name: "v1", Released: v1Released, Deprecated: v1Deprecated, Sunset: v1Sunset, DeprecationLink: upgradeGuide},
		{Name: "v2", Released: v2Released, Deprecated: v2Deprecated, Sunset: v2Sunset},
	}
}

// rename moves obj[from] to obj[to] when present.
func rename(obj map[string]any, from, to string) {
	if v, ok := obj[from]; ok {
		obj[to] = v
		delete(obj, from)
	}
}

// fixtureChanges are the breaking changes of v2 and v3, each with golden files under
// testdata/changes/<name>.
func fixtureChanges() []versioning.Change {
	return []versioning.Change{
		{
			Name: "order_side_renamed", Version: "v2", Object: "order",
			Description: "The order's direction is called side.",
			Response:    func(o map[string]any) error { rename(o, "side", "direction"); return nil },
			Request:     func(b map[string]any) error { rename(b, "direction", "side"); return nil },
		},
		{
			Name: "list_has_more_renamed", Version: "v2",
			Description: "Lists say has_more instead of more.",
			Response: func(b map[string]any) error {
				if b["object"] == "list" {
					rename(b, "has_more", "more")
				}
				return nil
			},
		},
		{
			Name: "order_amount_structured", Version: "v3", Object: "order",
			Description: "An order's amount is an object with value and currency.",
			Response: func(o map[string]any) error {
				amt, ok := o["amount"].(map[string]any)
				if !ok {
					return nil
				}
				o["amount"], o["currency"] = amt["value"], amt["currency"]
				return nil
			},
			Request: func(b map[string]any) error {
				if _, ok := b["amount"].(map[string]any); ok {
					return nil
				}
				if v, ok := b["amount"]; ok {
					b["amount"] = map[string]any{"value": v, "currency": b["currency"]}
					delete(b, "currency")
				}
				return nil
			},
		},
		{
			Name: "order_event_renamed", Version: "v3",
			Description: "order.placed is called order.created.",
			Event: func(p *versioning.Payload) error {
				if p.Type == "order.created" {
					p.Type = "order.placed"
				}
				return nil
			},
		},
	}
}

func fixtureRegistry(t testing.TB) *versioning.Registry {
	t.Helper()
	reg, err := versioning.NewRegistry(fixtureVersions(), fixtureChanges())
	require.NoError(t, err)
	return reg
}

// clock is a settable test clock.
type clock = testclock.Clock

func newClock(t time.Time) *clock { return testclock.New(t) }

// licenseeHeader is how the tests name a request's licensee; in a service the hook reads the
// authenticated principal instead.
const licenseeHeader = "X-Test-Licensee"

func headerLicensee(r *http.Request) (string, error) {
	return r.Header.Get(licenseeHeader), nil
}

// orderJSON is the newest (v3) shape of an order.
const orderJSON = `{"id":"ord_1","object":"order","account":"acc_1","side":"buy","amount":{"value":"10.50","currency":"EUR"},"status":"created","created":1767225600}`

// newestOrderHandler answers every request with the newest order, 201 and a Location, and echoes
// what it saw in headers so tests can check the request side.
func newestOrderHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d, _ := versioning.FromContext(r.Context())
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/orders/ord_1")
		w.Header().Set("X-Seen-Path", r.URL.Path)
		w.Header().Set("X-Seen-Version", d.Version.Name)
		w.Header().Set("X-Seen-Body", string(body))
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, orderJSON+"\n")
	})
}

type request struct {
	method, path, licensee, body, contentType string
}

func do(t *testing.T, h http.Handler, req request) *httptest.ResponseRecorder {
	t.Helper()
	method := req.method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if req.body != "" {
		body = strings.NewReader(req.body)
	}
	r := httptest.NewRequest(method, req.path, body)
	if req.licensee != "" {
		r.Header.Set(licenseeHeader, req.licensee)
	}
	if req.body != "" {
		ct := req.contentType
		if ct == "" {
			ct = "application/json"
		}
		r.Header.Set("Content-Type", ct)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// problem parses a problem response and checks what every problem of the router has.
func problem(t *testing.T, w *httptest.ResponseRecorder, status int, code string) *apierror.Error {
	t.Helper()
	require.Equal(t, status, w.Code, "body: %s", w.Body)
	require.Equal(t, apierror.MediaType, w.Header().Get("Content-Type"))
	require.NoError(t, apierror.Check(w.Code, w.Header(), w.Body.Bytes()), "the problem must conform")
	var p apierror.Error
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
	require.Equal(t, code, p.Code)
	return &p
}

// requireLocatedAtVersion checks that a problem is located at the path parameter "version".
func requireLocatedAtVersion(t *testing.T, p *apierror.Error, code string) {
	t.Helper()
	require.Len(t, p.Errors, 1)
	require.Equal(t, apierror.LocationPath, p.Errors[0].Location)
	require.Equal(t, versioning.ParamVersion, p.Errors[0].Name)
	require.Equal(t, code, p.Errors[0].Code)
}

// faultyPins is a PinStore whose calls fail on demand and count themselves. With t set, it also
// holds its caller to the PinStore contract: every argument the Router passes must be one a store
// may take without checking it (a test failure otherwise).
type faultyPins struct {
	versioning.PinStore
	t     testing.TB
	mu    sync.Mutex
	fail  error
	gets  int
	swaps int
}

// contract reports a call whose arguments break what the PinStore contract promises a store.
func (f *faultyPins) contract(method string, licensees []string, versions []string) {
	if f.t == nil {
		return
	}
	for _, lic := range licensees {
		if lic == "" || len(lic) > versioning.MaxLicenseeLen || !utf8.ValidString(lic) || strings.IndexByte(lic, 0) >= 0 {
			f.t.Errorf("PinStore.%s called with licensee %q, which the contract rules out", method, lic)
		}
	}
	for _, v := range versions {
		if (versioning.Version{Name: v}).Number() < 0 {
			f.t.Errorf("PinStore.%s called with version %q, which the contract rules out", method, v)
		}
	}
}

var errStoreDown = errors.New("pin store: connection refused")

func (f *faultyPins) setFail(err error) {
	f.mu.Lock()
	f.fail = err
	f.mu.Unlock()
}

func (f *faultyPins) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fail
}

func (f *faultyPins) Get(ctx context.Context, lic string) (versioning.Pin, error) {
	f.contract("Get", []string{lic}, nil)
	f.mu.Lock()
	f.gets++
	f.mu.Unlock()
	if err := f.err(); err != nil {
		return versioning.Pin{}, err
	}
	return f.PinStore.Get(ctx, lic)
}

func (f *faultyPins) SetIfAbsent(ctx context.Context, lic, v string, at time.Time) (versioning.Pin, bool, error) {
	f.contract("SetIfAbsent", []string{lic}, []string{v})
	if err := f.err(); err != nil {
		return versioning.Pin{}, false, err
	}
	return f.PinStore.SetIfAbsent(ctx, lic, v, at)
}

func (f *faultyPins) CompareAndSwap(ctx context.Context, lic, from, to string, at time.Time) (versioning.Pin, error) {
	f.contract("CompareAndSwap", []string{lic}, []string{to}) // from is what the store returned
	f.mu.Lock()
	f.swaps++
	f.mu.Unlock()
	if err := f.err(); err != nil {
		return versioning.Pin{}, err
	}
	return f.PinStore.CompareAndSwap(ctx, lic, from, to, at)
}

func (f *faultyPins) Delete(ctx context.Context, lic string) error {
	f.contract("Delete", []string{lic}, nil)
	if err := f.err(); err != nil {
		return err
	}
	return f.PinStore.Delete(ctx, lic)
}

func (f *faultyPins) List(ctx context.Context, version, after string, limit int) ([]versioning.Pin, error) {
	var lics, versions []string
	if after != "" {
		lics = []string{after}
	}
	if version != "" {
		versions = []string{version}
	}
	f.contract("List", lics, versions)
	if f.t != nil && (limit < 1 || limit > versioning.MaxPinList) {
		f.t.Errorf("PinStore.List called with limit %d, which the contract rules out", limit)
	}
	if err := f.err(); err != nil {
		return nil, err
	}
	return f.PinStore.List(ctx, version, after, limit)
}

func (f *faultyPins) getCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets
}
