package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

const licenseeHeader = "X-Test-Licensee" // stands in for the platform's authentication

func testLicensee(r *http.Request) (string, error) {
	if r.Header.Get("Authorization") == "Bearer broken" {
		return "", apierror.Unauthenticated("api_key_invalid", "the API key is not valid")
	}
	return r.Header.Get(licenseeHeader), nil
}

type rangeFixture struct {
	log     *memstore.Log
	eps     *memstore.Endpoints
	secrets []string
	mux     *http.ServeMux
	clk     *clock
}

func newRangeFixture(t *testing.T, opts *producer.RangeHandlerOptions) *rangeFixture {
	f := &rangeFixture{log: memstore.NewLog(), secrets: []string{webhook.NewSecret(), webhook.NewSecret()}, clk: newClock()}
	f.eps = mustEndpoints(t,
		producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: f.secrets, APIVersion: "v1"},
		producer.Endpoint{ID: "we_big", URL: "https://a.example/", Owner: "lic_1", Secrets: f.secrets[:1]},
		producer.Endpoint{ID: "we_b", URL: "https://b.example/", Owner: "lic_2", Secrets: []string{webhook.NewSecret()}})
	publishN(t, f.log, "we_a", 10, t0)
	publishN(t, f.log, "we_big", 1500, t0)
	publishN(t, f.log, "we_b", 5, t0)
	if opts == nil {
		opts = &producer.RangeHandlerOptions{}
	}
	if opts.Now == nil {
		opts.Now = f.clk.Now
	}
	f.mux = http.NewServeMux()
	f.mux.Handle(producer.RangePattern("v1"), must(producer.NewRangeHandler(f.log, f.eps, testLicensee, opts)))
	return f
}

func (f *rangeFixture) get(t *testing.T, licensee, target string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, target, nil)
	if licensee != "" {
		r.Header.Set(licenseeHeader, licensee)
	}
	w := httptest.NewRecorder()
	apierror.WithRequestID(f.mux).ServeHTTP(w, r)
	return w
}

func decodeList(t *testing.T, w *httptest.ResponseRecorder) webhook.EventList {
	t.Helper()
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var wire struct {
		Object string `json:"object"`
		Data   []struct {
			Object string `json:"object"`
			webhook.Event
		} `json:"data"`
		HasMore bool `json:"has_more"`
	}
	dec := json.NewDecoder(strings.NewReader(w.Body.String()))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&wire))
	list := webhook.EventList{Object: wire.Object, HasMore: wire.HasMore, Data: []webhook.Event{}}
	for _, e := range wire.Data {
		require.Equal(t, webhook.ObjectEvent, e.Object, "every event says what it is")
		list.Data = append(list.Data, e.Event)
	}
	return list
}

func listSeqs(l webhook.EventList) []uint64 {
	out := []uint64{}
	for _, e := range l.Data {
		out = append(out, e.Sequence)
	}
	return out
}

func spanSeqs(from, to uint64) []uint64 {
	out := []uint64{}
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func TestRangeHandlerServesInclusiveAscendingPages(t *testing.T) {
	f := newRangeFixture(t, nil)
	for _, tc := range []struct {
		name   string
		target string
		want   []uint64
		more   bool
	}{
		{"from only", "/v1/webhook_endpoints/we_a/events?from=1", spanSeqs(1, 10), false},
		{"inclusive range", "/v1/webhook_endpoints/we_a/events?from=3&to=5", spanSeqs(3, 5), false},
		{"single", "/v1/webhook_endpoints/we_a/events?from=7&to=7", spanSeqs(7, 7), false},
		{"limited", "/v1/webhook_endpoints/we_a/events?from=1&to=10&limit=4", spanSeqs(1, 4), true},
		{"limit reaches to exactly", "/v1/webhook_endpoints/we_a/events?from=2&to=5&limit=4", spanSeqs(2, 5), false},
		{"to beyond newest", "/v1/webhook_endpoints/we_a/events?from=9&to=500", spanSeqs(9, 10), false},
		{"past the end", "/v1/webhook_endpoints/we_a/events?from=11", []uint64{}, false},
		{"empty to and limit mean defaults", "/v1/webhook_endpoints/we_a/events?from=8&to=&limit=", spanSeqs(8, 10), false},
		{"default limit 100", "/v1/webhook_endpoints/we_big/events?from=1", spanSeqs(1, 100), true},
		{"max limit 1000", "/v1/webhook_endpoints/we_big/events?from=1&limit=1000", spanSeqs(1, 1000), true},
		{"last page", "/v1/webhook_endpoints/we_big/events?from=1001&limit=1000", spanSeqs(1001, 1500), false},
		{"unknown parameters ignored", "/v1/webhook_endpoints/we_a/events?from=1&to=2&expand=x", spanSeqs(1, 2), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := f.get(t, "lic_1", tc.target)
			list := decodeList(t, w)
			require.Equal(t, "list", list.Object)
			require.Equal(t, tc.want, listSeqs(list))
			require.Equal(t, tc.more, list.HasMore)
			require.Equal(t, "application/json", w.Header().Get("Content-Type"))
			require.Equal(t, "no-store", w.Header().Get("Cache-Control"))
			require.Contains(t, w.Body.String(), `"data":[`, "an empty page is [], not null")
		})
	}
}

func TestRangeHandlerSignsTheBody(t *testing.T) {
	f := newRangeFixture(t, nil)
	f.clk.Advance(42 * time.Second)
	w := f.get(t, "lic_1", "/v1/webhook_endpoints/we_a/events?from=1&to=3")
	require.Equal(t, http.StatusOK, w.Code)
	checkSignature(t, w.Header().Get(webhook.HeaderSignature), w.Body.Bytes(), t0.Add(42*time.Second), f.secrets...)

	// The events read exactly as they were published.
	list := decodeList(t, w)
	want, _, err := f.log.Range(context.Background(), "we_a", 1, 3, 10)
	require.NoError(t, err)
	for i := range want {
		require.Equal(t, want[i].ID, list.Data[i].ID)
		require.JSONEq(t, string(want[i].Data), string(list.Data[i].Data))
	}
}

func TestRangeHandlerBadParameters(t *testing.T) {
	f := newRangeFixture(t, nil)
	type loc struct{ name, code string }
	for _, tc := range []struct {
		name  string
		query string
		want  []loc
	}{
		{"from missing", "", []loc{{"from", apierror.CodeQueryMissing}}},
		{"from empty", "from=", []loc{{"from", apierror.CodeQueryMissing}}},
		{"from not numeric", "from=abc", []loc{{"from", producer.CodeNotInteger}}},
		{"from negative", "from=-1", []loc{{"from", producer.CodeNotInteger}}},
		{"from signed", "from=%2B1", []loc{{"from", producer.CodeNotInteger}}},
		{"from fractional", "from=1.5", []loc{{"from", producer.CodeNotInteger}}},
		{"from zero", "from=0", []loc{{"from", producer.CodeOutOfRange}}},
		{"from overflows", "from=18446744073709551616", []loc{{"from", producer.CodeOutOfRange}}},
		{"from repeated", "from=1&from=2", []loc{{"from", producer.CodeRepeated}}},
		{"to not numeric", "from=1&to=ten", []loc{{"to", producer.CodeNotInteger}}},
		{"from above to", "from=5&to=3", []loc{{"to", producer.CodeRangeInverted}}},
		{"limit zero", "from=1&limit=0", []loc{{"limit", producer.CodeOutOfRange}}},
		{"limit above max", "from=1&limit=1001", []loc{{"limit", producer.CodeOutOfRange}}},
		{"limit not numeric", "from=1&limit=many", []loc{{"limit", producer.CodeNotInteger}}},
		{"several at once", "from=x&to=y&limit=5000", []loc{{"from", producer.CodeNotInteger}, {"to", producer.CodeNotInteger}, {"limit", producer.CodeOutOfRange}}},
		// r.URL.Query() would drop the pair and serve up to the newest event as if "to" were absent.
		{"to with a bad escape", "from=1&to=%zz", []loc{{"to", apierror.CodeQueryMalformed}}},
		{"to with a truncated escape", "from=1&to=3%2", []loc{{"to", apierror.CodeQueryMalformed}}},
		{"semicolon", "from=1;to=3", []loc{{"from", apierror.CodeQueryMalformed}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := f.get(t, "lic_1", "/v1/webhook_endpoints/we_a/events?"+tc.query)
			require.Equal(t, http.StatusBadRequest, w.Code)
			require.NoError(t, apierror.CheckResponse(w.Result()), "conforms to the error conventions")
			p, err := apierror.Parse(w.Result())
			require.NoError(t, err)
			var got []loc
			for _, v := range p.Errors {
				require.Equal(t, apierror.LocationQuery, v.Location)
				require.NotEmpty(t, v.Detail)
				got = append(got, loc{v.Name, v.Code})
			}
			require.Equal(t, tc.want, got)
			// The request ID is random and may hold "abc" itself: look at the rest.
			body := problemWithoutRequestID(t, w)
			raw, err := json.Marshal(body)
			require.NoError(t, err)
			require.NotContains(t, string(raw), "abc", "values are not echoed")
		})
	}
}

func problemWithoutRequestID(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &m))
	require.NotEmpty(t, m["request_id"])
	delete(m, "request_id")
	return m
}

func TestRangeHandlerNeverShowsAnotherLicenseesEvents(t *testing.T) {
	f := newRangeFixture(t, nil)
	foreign := f.get(t, "lic_1", "/v1/webhook_endpoints/we_b/events?from=1")
	require.Equal(t, http.StatusNotFound, foreign.Code)
	require.NoError(t, apierror.CheckResponse(foreign.Result()))
	require.NotContains(t, foreign.Body.String(), `"sequence"`)

	// A foreign endpoint reads exactly like one that does not exist.
	f.eps.Delete("we_b")
	unknown := f.get(t, "lic_1", "/v1/webhook_endpoints/we_b/events?from=1")
	require.Equal(t, http.StatusNotFound, unknown.Code)
	require.Equal(t, problemWithoutRequestID(t, unknown), problemWithoutRequestID(t, foreign))
	require.Equal(t, unknown.Header().Get("Content-Type"), foreign.Header().Get("Content-Type"))

	for _, tc := range []struct{ name, licensee, target string }{
		{"foreign with bad parameters", "lic_2", "/v1/webhook_endpoints/we_a/events?from=x"},
		{"foreign, valid parameters", "lic_2", "/v1/webhook_endpoints/we_a/events?from=1"},
		{"no licensee", "", "/v1/webhook_endpoints/we_a/events?from=1"},
		{"unknown", "lic_1", "/v1/webhook_endpoints/we_nope/events?from=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := f.get(t, tc.licensee, tc.target)
			require.Equal(t, http.StatusNotFound, w.Code, "existence is not revealed: %s", w.Body.String())
			p, err := apierror.Parse(w.Result())
			require.NoError(t, err)
			require.Equal(t, producer.CodeEndpointNotFound, p.Code)
			require.Equal(t, apierror.LocationPath, p.Errors[0].Location)
			require.Equal(t, "id", p.Errors[0].Name)
		})
	}
}

func TestRangeHandlerAuthenticationError(t *testing.T) {
	f := newRangeFixture(t, nil)
	r := httptest.NewRequest(http.MethodGet, "/v1/webhook_endpoints/we_a/events?from=1", nil)
	r.Header.Set("Authorization", "Bearer broken")
	w := httptest.NewRecorder()
	f.mux.ServeHTTP(w, r)
	require.Equal(t, http.StatusUnauthorized, w.Code)
	require.Equal(t, `Bearer realm="svcplatform"`, w.Header().Get("WWW-Authenticate"))
}

func TestRangeHandlerPrunedRange(t *testing.T) {
	f := newRangeFixture(t, nil)
	// Events 1–10 of we_a were created at t0; retention removes three of them.
	n, err := f.log.Cleanup(context.Background(), t0.Add(time.Second), 3)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	for _, tc := range []struct {
		name, query, gone string
	}{
		{"overlapping the window", "from=1&to=10", "events 1–3"},
		{"entirely below", "from=2&to=2", "events 2 of"},
		{"open end", "from=3", "events 3 of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := f.get(t, "lic_1", "/v1/webhook_endpoints/we_a/events?"+tc.query)
			require.Equal(t, http.StatusGone, w.Code)
			require.NoError(t, apierror.CheckResponse(w.Result()))
			p, err := apierror.Parse(w.Result())
			require.NoError(t, err)
			require.Equal(t, producer.CodeEventsPruned, p.Code)
			require.Contains(t, p.Detail, tc.gone)
			require.Contains(t, p.Detail, "the first retained sequence is 4")
			require.EqualValues(t, 4, p.Extensions["first_retained"])
			require.Equal(t, []apierror.Violation{apierror.Query("from", producer.CodeEventsPruned,
				"must be at least 4, the first retained sequence")}, p.Errors)
		})
	}
	list := decodeList(t, f.get(t, "lic_1", "/v1/webhook_endpoints/we_a/events?from=4"))
	require.Equal(t, spanSeqs(4, 10), listSeqs(list))
}

func TestRangeHandlerRendersAtPinnedVersion(t *testing.T) {
	f := newRangeFixture(t, &producer.RangeHandlerOptions{Render: func(_ context.Context, ep producer.Endpoint, ev webhook.Event) (webhook.Event, error) {
		ev.APIVersion = "rendered-" + ep.APIVersion
		return ev, nil
	}})
	list := decodeList(t, f.get(t, "lic_1", "/v1/webhook_endpoints/we_a/events?from=1&to=2"))
	for _, e := range list.Data {
		require.Equal(t, "rendered-v1", e.APIVersion)
	}

	broken := newRangeFixture(t, &producer.RangeHandlerOptions{Render: func(context.Context, producer.Endpoint, webhook.Event) (webhook.Event, error) {
		return webhook.Event{}, errors.New("transform missing")
	}})
	w := broken.get(t, "lic_1", "/v1/webhook_endpoints/we_a/events?from=1")
	require.Equal(t, http.StatusInternalServerError, w.Code)
	require.NotContains(t, w.Body.String(), "transform missing", "5xx bodies carry no internal detail")
}

func TestRangeHandlerOtherRouters(t *testing.T) {
	f := newRangeFixture(t, nil)
	h := must(producer.NewRangeHandler(f.log, f.eps, testLicensee, &producer.RangeHandlerOptions{
		EndpointID: func(r *http.Request) string { return strings.TrimPrefix(r.URL.Path, "/hooks/") },
	}))
	r := httptest.NewRequest(http.MethodGet, "/hooks/we_a?from=2&to=3", nil)
	r.Header.Set(licenseeHeader, "lic_1")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	require.Equal(t, []uint64{2, 3}, listSeqs(decodeList(t, w)))
}

func TestRangeHandlerMethods(t *testing.T) {
	f := newRangeFixture(t, nil)
	h := must(producer.NewRangeHandler(f.log, f.eps, testLicensee, nil))
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		r := httptest.NewRequest(m, "/v1/webhook_endpoints/we_a/events?from=1", nil)
		r.SetPathValue("id", "we_a")
		r.Header.Set(licenseeHeader, "lic_1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		require.Equal(t, http.StatusMethodNotAllowed, w.Code, m)
		require.Equal(t, "GET, HEAD", w.Header().Get("Allow"))
	}
	r := httptest.NewRequest(http.MethodHead, "/v1/webhook_endpoints/we_a/events?from=1", nil)
	r.SetPathValue("id", "we_a")
	r.Header.Set(licenseeHeader, "lic_1")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	require.Equal(t, http.StatusOK, w.Code)
	require.Empty(t, w.Body.String())
	require.NotEmpty(t, w.Header().Get(webhook.HeaderSignature))
}

type brokenLog struct{ driver.Log }

func (brokenLog) Range(context.Context, string, uint64, uint64, int) ([]webhook.Event, bool, error) {
	return nil, false, errors.New("connection reset by peer 10.0.0.7:5432")
}

func TestRangeHandlerStoreFailureIsOpaque(t *testing.T) {
	f := newRangeFixture(t, nil)
	h := must(producer.NewRangeHandler(brokenLog{f.log}, f.eps, testLicensee, nil))
	mux := http.NewServeMux()
	mux.Handle(producer.RangePattern("v1"), h)
	r := httptest.NewRequest(http.MethodGet, "/v1/webhook_endpoints/we_a/events?from=1", nil)
	r.Header.Set(licenseeHeader, "lic_1")
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	require.Equal(t, http.StatusInternalServerError, w.Code)
	require.NotContains(t, w.Body.String(), "10.0.0.7")
}

func TestRangeOverHTTP(t *testing.T) {
	// Through a real server and client, as a consumer's range fetch sees it.
	f := newRangeFixture(t, nil)
	srv := httptest.NewServer(f.mux)
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/webhook_endpoints/we_a/events?from=4&to=6", nil)
	require.NoError(t, err)
	req.Header.Set(licenseeHeader, "lic_1")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	checkSignature(t, resp.Header.Get(webhook.HeaderSignature), body, t0, f.secrets...)
	var list webhook.EventList
	require.NoError(t, json.Unmarshal(body, &list))
	require.Equal(t, []uint64{4, 5, 6}, listSeqs(list))
}

func TestRangeRotatedSecretTakesEffectOnNextRequest(t *testing.T) {
	f := newRangeFixture(t, nil)
	target := "/v1/webhook_endpoints/we_a/events?from=1&to=2"
	check := func(secrets ...string) {
		t.Helper()
		w := f.get(t, "lic_1", target)
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
		checkSignature(t, w.Header().Get(webhook.HeaderSignature), w.Body.Bytes(), t0, secrets...)
	}
	check(f.secrets...)
	check(f.secrets...) // cached
	next := webhook.NewSecret()
	require.NoError(t, f.eps.Put(producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{next}, APIVersion: "v1"}))
	check(next)
}

// Range retrieval is mounted under every version: RangePattern(v), and RangePattern("") behind a
// router that strips the version segment.
func TestRangePatterns(t *testing.T) {
	require.Equal(t, "GET /v2/webhook_endpoints/{id}/events", producer.RangePattern("v2"))
	require.Equal(t, "GET /webhook_endpoints/{id}/events", producer.RangePattern(""))
	require.Equal(t, "GET /v1/webhook_endpoints/{id}/deliveries", producer.DeliveriesPattern("v1"))
	require.Equal(t, "GET /webhook_endpoints/{id}/deliveries", producer.DeliveriesPattern(""))
	f := newRangeFixture(t, nil)
	h := must(producer.NewRangeHandler(f.log, f.eps, testLicensee, &producer.RangeHandlerOptions{Now: f.clk.Now}))
	f.mux.Handle(producer.RangePattern("v2"), h)
	stripped := http.NewServeMux()
	stripped.Handle(producer.RangePattern(""), h)
	f.mux.Handle("/v3/", http.StripPrefix("/v3", stripped))
	for _, v := range []string{"v1", "v2", "v3"} {
		list := decodeList(t, f.get(t, "lic_1", "/"+v+"/webhook_endpoints/we_a/events?from=2&to=4"))
		require.Equal(t, []uint64{2, 3, 4}, listSeqs(list), v)
	}
}
