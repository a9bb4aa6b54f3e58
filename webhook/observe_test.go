package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/webhooktest"
)

// spanKey marks the contexts a fakeObserver's Start methods return, so that a test can check that
// every later call got the context of the right Start.
type spanKey struct{}

// fakeObserver records every call, with the span (the number of the Start that made the context) it
// was called in; 0 means outside any.
type fakeObserver struct {
	mu        sync.Mutex
	spans     int
	verified  []call[webhook.VerifyInfo]
	starts    []call[webhook.ReceiveStartInfo]
	traces    []string // the traceparent each ReceiveStart could read
	ends      []call[webhook.ReceiveEndInfo]
	sequenced []call[webhook.SequenceInfo]
	fetches   []call[webhook.RangeFetchStartInfo]
	fetchEnds []call[webhook.RangeFetchEndInfo]
	injected  []int
}

type call[T any] struct {
	span int
	info T
}

func spanOf(ctx context.Context) int {
	n, _ := ctx.Value(spanKey{}).(int)
	return n
}

func (o *fakeObserver) Verified(ctx context.Context, info webhook.VerifyInfo) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.verified = append(o.verified, call[webhook.VerifyInfo]{spanOf(ctx), info})
}

func (o *fakeObserver) ReceiveStart(ctx context.Context, info webhook.ReceiveStartInfo) context.Context {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.spans++
	o.starts = append(o.starts, call[webhook.ReceiveStartInfo]{spanOf(ctx), info})
	o.traces = append(o.traces, info.Trace.Get("traceparent"))
	return context.WithValue(ctx, spanKey{}, o.spans)
}

func (o *fakeObserver) ReceiveEnd(ctx context.Context, info webhook.ReceiveEndInfo) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ends = append(o.ends, call[webhook.ReceiveEndInfo]{spanOf(ctx), info})
}

func (o *fakeObserver) Sequenced(ctx context.Context, info webhook.SequenceInfo) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sequenced = append(o.sequenced, call[webhook.SequenceInfo]{spanOf(ctx), info})
}

func (o *fakeObserver) RangeFetchStart(ctx context.Context, info webhook.RangeFetchStartInfo) context.Context {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.spans++
	o.fetches = append(o.fetches, call[webhook.RangeFetchStartInfo]{spanOf(ctx), info})
	return context.WithValue(ctx, spanKey{}, o.spans)
}

// InjectTrace writes "span-<n>" as the traceparent, and tries to overwrite the credentials beside it.
func (o *fakeObserver) InjectTrace(ctx context.Context, carrier webhook.TraceCarrier) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.injected = append(o.injected, spanOf(ctx))
	carrier.Set("traceparent", "span-"+strconv.Itoa(spanOf(ctx)))
	carrier.Set("Authorization", "Bearer stolen")
}

func (o *fakeObserver) RangeFetchEnd(ctx context.Context, info webhook.RangeFetchEndInfo) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fetchEnds = append(o.fetchEnds, call[webhook.RangeFetchEndInfo]{spanOf(ctx), info})
}

// hooks are the fake's methods as webhook.Hooks.
func (o *fakeObserver) hooks() *webhook.Hooks {
	return &webhook.Hooks{Verified: o.Verified, ReceiveStart: o.ReceiveStart, ReceiveEnd: o.ReceiveEnd,
		Sequenced: o.Sequenced, RangeFetchStart: o.RangeFetchStart, InjectTrace: o.InjectTrace, RangeFetchEnd: o.RangeFetchEnd}
}

// nopHooks do nothing, every field set: with them, any allocation on the hot path is the core's own.
func nopHooks() *webhook.Hooks {
	return &webhook.Hooks{
		Verified:        func(context.Context, webhook.VerifyInfo) {},
		ReceiveStart:    func(ctx context.Context, _ webhook.ReceiveStartInfo) context.Context { return ctx },
		ReceiveEnd:      func(context.Context, webhook.ReceiveEndInfo) {},
		Sequenced:       func(context.Context, webhook.SequenceInfo) {},
		RangeFetchStart: func(ctx context.Context, _ webhook.RangeFetchStartInfo) context.Context { return ctx },
		InjectTrace:     func(context.Context, webhook.TraceCarrier) {},
		RangeFetchEnd:   func(context.Context, webhook.RangeFetchEndInfo) {},
	}
}

// signedDelivery is a delivery of one event to stream, with its headers as the producer sends them.
func signedDelivery(t testing.TB, secret string, seq uint64, at time.Time) (body []byte, signature string) {
	t.Helper()
	ev := webhooktest.NewEvent(seq, "order.created", map[string]int{"n": int(seq)}, epoch)
	ev.Endpoint = stream
	body = webhooktest.Body(ev)
	return body, webhooktest.Header(body, at, secret)
}

// verifyCases are hostile and honest X-SVC-Signature values for one body, with the result each must
// be reported as and the status a Receiver answers.
func verifyCases(t *testing.T, secret string, body []byte) []struct {
	name   string
	header string
	want   webhook.VerifyResult
	status int
	code   string
} {
	good := webhooktest.Header(body, epoch, secret)
	sig := good[strings.Index(good, "v1="):]
	return []struct {
		name   string
		header string
		want   webhook.VerifyResult
		status int
		code   string
	}{
		{"ok", good, webhook.VerifyOK, 200, ""},
		{"bad signature", webhooktest.Header(body, epoch, webhook.NewSecret()), webhook.VerifyMismatch, 401, webhook.CodeSignatureMismatch},
		{"body signed was another", webhooktest.Header([]byte(`{"x":1}`), epoch, secret), webhook.VerifyMismatch, 401, webhook.CodeSignatureMismatch},
		{"stale timestamp", webhooktest.Header(body, epoch.Add(-301*time.Second), secret), webhook.VerifyTooOld, 401, webhook.CodeSignatureTooOld},
		{"future timestamp", webhooktest.Header(body, epoch.Add(301*time.Second), secret), webhook.VerifyTooNew, 401, webhook.CodeSignatureTooNew},
		{"missing header", "", webhook.VerifyMissing, 400, "header_missing"},
		{"malformed: no t", sig, webhook.VerifyMalformed, 400, webhook.CodeSignatureInvalid},
		{"malformed: two t", "t=1,t=2," + sig, webhook.VerifyMalformed, 400, webhook.CodeSignatureInvalid},
		{"malformed: bad hex", "t=" + strconv.FormatInt(epoch.Unix(), 10) + ",v1=zz", webhook.VerifyMalformed, 400, webhook.CodeSignatureInvalid},
		{"malformed: no v1", "t=" + strconv.FormatInt(epoch.Unix(), 10), webhook.VerifyMalformed, 400, webhook.CodeSignatureInvalid},
	}
}

// TestObserverVerifyResults: Verify and VerifyTime report each verification once, with its result,
// as a delivery.
func TestObserverVerifyResults(t *testing.T) {
	secret := webhook.NewSecret()
	body, _ := signedDelivery(t, secret, 1, epoch)
	for _, tc := range verifyCases(t, secret, body) {
		t.Run(tc.name, func(t *testing.T) {
			obs := &fakeObserver{}
			v, err := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: func() time.Time { return epoch }, Hooks: obs.hooks()})
			require.NoError(t, err)
			_ = v.Verify(tc.header, body)
			_, _ = v.VerifyTime(tc.header, body)
			want := call[webhook.VerifyInfo]{0, webhook.VerifyInfo{Result: tc.want, RangeResponse: false}}
			require.Equal(t, []call[webhook.VerifyInfo]{want, want}, obs.verified)
		})
	}
}

// newObservedReceiver is a Receiver whose Verifier, Tracker and Receiver report to obs, fetching gaps
// from src directly.
func newObservedReceiver(t testing.TB, secret string, src webhook.RangeFetcher, obs *webhook.Hooks) (*webhook.Receiver, *webhook.MemoryCursorStore) {
	t.Helper()
	v, err := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: func() time.Time { return epoch }, Hooks: obs})
	require.NoError(t, err)
	store := &webhook.MemoryCursorStore{}
	tr, err := webhook.NewTracker(store, src, func(context.Context, webhook.Step) error { return nil },
		&webhook.TrackerOptions{Hooks: obs})
	require.NoError(t, err)
	rc, err := webhook.NewReceiver(stream, v, tr, &webhook.ReceiverOptions{Hooks: obs})
	require.NoError(t, err)
	return rc, store
}

// TestObserverReceiverVerifications: every delivery to a Receiver is one ReceiveStart, one
// verification in its context, and one ReceiveEnd with the status answered; the start sees the
// traceparent but not the signature.
func TestObserverReceiverVerifications(t *testing.T) {
	secret := webhook.NewSecret()
	body, _ := signedDelivery(t, secret, 1, epoch)
	for _, tc := range verifyCases(t, secret, body) {
		t.Run(tc.name, func(t *testing.T) {
			obs := &fakeObserver{}
			rc, _ := newObservedReceiver(t, secret, newSource(t, 0), obs.hooks())
			r := webhooktest.NewRequestBody("/webhooks", body, 1, epoch, secret)
			r.Header.Set(webhook.HeaderSignature, tc.header)
			r.Header.Set("Traceparent", "00-trace-from-producer")
			w := httptest.NewRecorder()
			rc.ServeHTTP(w, r)
			require.Equal(t, tc.status, w.Code, w.Body.String())

			require.Equal(t, []call[webhook.ReceiveStartInfo]{{0, webhook.ReceiveStartInfo{Stream: stream, Trace: webhook.NewTraceCarrier(r.Header)}}}, obs.starts)
			require.Equal(t, []string{"00-trace-from-producer"}, obs.traces)
			require.Equal(t, []call[webhook.VerifyInfo]{{1, webhook.VerifyInfo{Result: tc.want}}}, obs.verified)
			end := webhook.ReceiveEndInfo{Stream: stream, Status: tc.status, Code: tc.code}
			if tc.status == 200 {
				end = webhook.ReceiveEndInfo{Stream: stream, Status: 200, Outcome: webhook.Processed, Sequence: 1}
				require.Equal(t, []call[webhook.SequenceInfo]{{1, webhook.SequenceInfo{Stream: stream, Sequence: 1, Outcome: webhook.Processed}}}, obs.sequenced)
			} else {
				require.Empty(t, obs.sequenced)
			}
			require.Equal(t, []call[webhook.ReceiveEndInfo]{{1, end}}, obs.ends)
		})
	}
}

// TestObserverReceiverAnswers: deliveries refused before or after verification end with the status
// and code answered; Receive (no HTTP) reports as ServeHTTP does, without trace headers.
func TestObserverReceiverAnswers(t *testing.T) {
	secret := webhook.NewSecret()
	body, sig := signedDelivery(t, secret, 1, epoch)
	failing := webhook.RangeFetcherFunc(func(context.Context, string, uint64, uint64) ([]webhook.Event, error) {
		return nil, errors.New("producer down")
	})
	t.Run("method", func(t *testing.T) {
		obs := &fakeObserver{}
		rc, _ := newObservedReceiver(t, secret, failing, obs.hooks())
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/webhooks", nil))
		require.Equal(t, 405, w.Code)
		require.Empty(t, obs.verified)
		require.Equal(t, []call[webhook.ReceiveEndInfo]{{1, webhook.ReceiveEndInfo{Stream: stream, Status: 405, Code: "method_not_allowed"}}}, obs.ends)
	})
	t.Run("too large", func(t *testing.T) {
		obs := &fakeObserver{}
		rc, _ := newObservedReceiver(t, secret, failing, obs.hooks())
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, webhooktest.NewRequestBody("/webhooks", make([]byte, 2<<20), 1, epoch, secret))
		require.Equal(t, 413, w.Code)
		require.Empty(t, obs.verified)
		require.Len(t, obs.ends, 1)
		require.Equal(t, 413, obs.ends[0].info.Status)
	})
	t.Run("gap fetch fails: 503 after the gap verdict", func(t *testing.T) {
		obs := &fakeObserver{}
		rc, _ := newObservedReceiver(t, secret, failing, obs.hooks())
		body3, sig3 := signedDelivery(t, secret, 3, epoch)
		_, err := rc.Receive(t.Context(), sig3, "3", body3)
		require.Error(t, err)
		require.Equal(t, []call[webhook.ReceiveStartInfo]{{0, webhook.ReceiveStartInfo{Stream: stream}}}, obs.starts)
		require.Equal(t, []string{""}, obs.traces)
		require.Equal(t, []call[webhook.VerifyInfo]{{1, webhook.VerifyInfo{Result: webhook.VerifyOK}}}, obs.verified)
		require.Equal(t, []call[webhook.SequenceInfo]{{1, webhook.SequenceInfo{Stream: stream, Sequence: 3, Outcome: webhook.Gap, Missing: 2}}}, obs.sequenced)
		require.Equal(t, []call[webhook.ReceiveEndInfo]{{1, webhook.ReceiveEndInfo{Stream: stream, Status: 503, Code: webhook.CodeDeliveryFailed}}}, obs.ends)
	})
	t.Run("Receive ok", func(t *testing.T) {
		obs := &fakeObserver{}
		rc, _ := newObservedReceiver(t, secret, failing, obs.hooks())
		res, err := rc.Receive(t.Context(), sig, "1", body)
		require.NoError(t, err)
		require.Equal(t, webhook.Processed, res.Outcome)
		require.Equal(t, []call[webhook.ReceiveEndInfo]{{1, webhook.ReceiveEndInfo{Stream: stream, Status: 200, Outcome: webhook.Processed, Sequence: 1}}}, obs.ends)
	})
}

// TestObserverSequenceVerdicts: the Tracker reports each verdict once, in the delivery's context,
// with the gap's size.
func TestObserverSequenceVerdicts(t *testing.T) {
	secret := webhook.NewSecret()
	src := webhooktest.NewSource(secret, "sk_sandbox_test", &webhooktest.SourceOptions{Now: func() time.Time { return epoch }})
	for i := range 10 {
		src.Emit(stream, "order.created", map[string]int{"n": i})
	}
	obs := &fakeObserver{}
	rc, store := newObservedReceiver(t, secret, src, obs.hooks())
	for _, seq := range []uint64{1, 2, 2, 1, 7, 8, 10} {
		rec := src.Deliver(rc, stream, seq)
		require.Equal(t, 200, rec.Code, rec.Body.String())
	}
	require.Equal(t, uint64(10), cursorOf(t, store))
	info := func(seq, cur uint64, o webhook.Outcome, missing uint64) webhook.SequenceInfo {
		return webhook.SequenceInfo{Stream: stream, Sequence: seq, Cursor: cur, Outcome: o, Missing: missing}
	}
	require.Equal(t, []call[webhook.SequenceInfo]{
		{1, info(1, 0, webhook.Processed, 0)},
		{2, info(2, 1, webhook.Processed, 0)},
		{3, info(2, 2, webhook.Duplicate, 0)},
		{4, info(1, 2, webhook.Duplicate, 0)},
		{5, info(7, 2, webhook.Gap, 4)},
		{6, info(8, 7, webhook.Processed, 0)},
		{7, info(10, 8, webhook.Gap, 1)},
	}, obs.sequenced)
	require.Len(t, obs.verified, 7)
	require.Equal(t, webhook.ReceiveEndInfo{Stream: stream, Status: 200, Outcome: webhook.Processed, Sequence: 7, Recovered: 4}, obs.ends[4].info)
	require.Equal(t, webhook.ReceiveEndInfo{Stream: stream, Status: 200, Outcome: webhook.Duplicate, Sequence: 1}, obs.ends[3].info)

	// StartAtFirstSeen: the first delivery is processed whatever its sequence, and earlier ones
	// are duplicates.
	obs2 := &fakeObserver{}
	tr, err := webhook.NewTracker(&webhook.MemoryCursorStore{}, src, func(context.Context, webhook.Step) error { return nil },
		&webhook.TrackerOptions{Start: webhook.StartAtFirstSeen, Hooks: obs2.hooks()})
	require.NoError(t, err)
	for _, seq := range []uint64{5, 3} {
		ev := src.Event(stream, seq)
		_, err := tr.Receive(t.Context(), stream, &ev)
		require.NoError(t, err)
	}
	require.Equal(t, []call[webhook.SequenceInfo]{
		{0, info(5, 0, webhook.Processed, 0)},
		{0, info(3, 5, webhook.Duplicate, 0)},
	}, obs2.sequenced)
}

// testClock is a clock that moves only when told to.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestObserverRangeFetch: each FetchRange is one start and one end with its result, size and the
// duration on the Verifier's clock; each request carries the trace context injected in the fetch's
// context and still its own Authorization.
func TestObserverRangeFetch(t *testing.T) {
	secret := webhook.NewSecret()
	clock := &testClock{now: epoch}
	src := webhooktest.NewSource(secret, apiKey, &webhooktest.SourceOptions{Now: func() time.Time { return epoch }})
	for i := range 20 {
		src.Emit(stream, "order.created", map[string]int{"n": i})
	}
	var (
		mu       sync.Mutex
		seen     []string // traceparent and Authorization of each request
		override http.HandlerFunc
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		clock.Advance(250 * time.Millisecond) // every request takes 250 ms on the test clock
		mu.Lock()
		seen = append(seen, r.Header.Get("traceparent")+" "+r.Header.Get("Authorization"))
		h := override
		mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		src.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	newClient := func(t *testing.T, secret string, opts webhook.RangeClientOptions) (*webhook.RangeClient, *fakeObserver) {
		obs := &fakeObserver{}
		v, err := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: clock.Now, Hooks: obs.hooks()})
		require.NoError(t, err)
		opts.HTTPClient, opts.Hooks = srv.Client(), obs.hooks()
		c, err := webhook.NewRangeClient(srv.URL, apiKey, v, &opts)
		require.NoError(t, err)
		mu.Lock()
		seen, override = nil, nil
		mu.Unlock()
		return c, obs
	}
	bearer := "Bearer " + apiKey

	t.Run("ok, three pages", func(t *testing.T) {
		c, obs := newClient(t, secret, webhook.RangeClientOptions{PageSize: 4})
		ctx := context.WithValue(t.Context(), spanKey{}, 99) // the caller's span
		evs, err := c.FetchRange(ctx, stream, 3, 12)
		require.NoError(t, err)
		require.Len(t, evs, 10)
		require.Equal(t, []call[webhook.RangeFetchStartInfo]{{99, webhook.RangeFetchStartInfo{Stream: stream, From: 3, To: 12}}}, obs.fetches)
		require.Equal(t, []int{1, 1, 1}, obs.injected)
		require.Equal(t, []string{"span-1 " + bearer, "span-1 " + bearer, "span-1 " + bearer}, seen)
		rangeVerified := call[webhook.VerifyInfo]{1, webhook.VerifyInfo{Result: webhook.VerifyOK, RangeResponse: true}}
		require.Equal(t, []call[webhook.VerifyInfo]{rangeVerified, rangeVerified, rangeVerified}, obs.verified)
		require.Len(t, obs.fetchEnds, 1)
		end := obs.fetchEnds[0]
		require.Equal(t, 1, end.span)
		require.Positive(t, end.info.Bytes)
		end.info.Bytes = 0
		require.Equal(t, webhook.RangeFetchEndInfo{Stream: stream, Result: webhook.RangeFetchOK, Status: 200, Events: 10, Pages: 3,
			Duration: 750 * time.Millisecond}, end.info)
	})

	for _, tc := range []struct {
		name     string
		secret   string
		opts     webhook.RangeClientOptions
		handler  http.HandlerFunc
		ctx      func(context.Context) context.Context
		want     webhook.RangeFetchResult
		status   int
		pages    int
		verified []webhook.VerifyResult
	}{
		{name: "producer problem", handler: func(w http.ResponseWriter, r *http.Request) {
			src.FailFetches(1)
			src.ServeHTTP(w, r)
		}, want: webhook.RangeFetchProblem, status: 503, pages: 1},
		{name: "bad signature", secret: webhook.NewSecret(), want: webhook.RangeFetchSignature, status: 200, pages: 1,
			verified: []webhook.VerifyResult{webhook.VerifyMismatch}},
		{name: "unsigned", handler: func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"object":"list","data":[],"has_more":false}`))
		}, want: webhook.RangeFetchSignature, status: 200, pages: 1, verified: []webhook.VerifyResult{webhook.VerifyMissing}},
		{name: "not a list", handler: func(w http.ResponseWriter, r *http.Request) {
			body := []byte(`{"object":"event"}`)
			w.Header().Set(webhook.HeaderSignature, webhooktest.Header(body, epoch, secret))
			_, _ = w.Write(body)
		}, want: webhook.RangeFetchInvalid, status: 200, pages: 1, verified: []webhook.VerifyResult{webhook.VerifyOK}},
		{name: "too large", opts: webhook.RangeClientOptions{MaxResponseBytes: 100}, want: webhook.RangeFetchTooLarge, status: 200, pages: 1},
		{name: "transport", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1000")
			_, _ = w.Write([]byte("short"))
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // the connection breaks mid-body
		}, want: webhook.RangeFetchTransport, status: 200, pages: 1},
		{name: "canceled", ctx: func(ctx context.Context) context.Context {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return ctx
		}, want: webhook.RangeFetchCanceled, pages: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sec := secret
			if tc.secret != "" {
				sec = tc.secret
			}
			c, obs := newClient(t, sec, tc.opts)
			mu.Lock()
			override = tc.handler
			mu.Unlock()
			ctx := t.Context()
			if tc.ctx != nil {
				ctx = tc.ctx(ctx)
			}
			start := clock.Now()
			_, err := c.FetchRange(ctx, stream, 1, 5)
			require.Error(t, err)
			require.Len(t, obs.fetchEnds, 1)
			end := obs.fetchEnds[0].info
			require.Equal(t, tc.want, end.Result, "%v", err)
			require.Equal(t, tc.status, end.Status)
			require.Equal(t, tc.pages, end.Pages)
			require.Zero(t, end.Events)
			require.Equal(t, clock.Now().Sub(start), end.Duration)
			var got []webhook.VerifyResult
			for _, v := range obs.verified {
				require.True(t, v.info.RangeResponse)
				got = append(got, v.info.Result)
			}
			require.Equal(t, tc.verified, got)
		})
	}
}

// TestObserverGapFetchThroughRangeClient: a gap found by a Receiver is fetched by the RangeClient in
// the delivery's context: the fetch's span is a child of the receive span.
func TestObserverGapFetchThroughRangeClient(t *testing.T) {
	secret := webhook.NewSecret()
	src := webhooktest.NewSource(secret, apiKey, &webhooktest.SourceOptions{Now: func() time.Time { return epoch }})
	for i := range 5 {
		src.Emit(stream, "order.created", map[string]int{"n": i})
	}
	srv := httptest.NewServer(src)
	t.Cleanup(srv.Close)
	obs := &fakeObserver{}
	v, err := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: func() time.Time { return epoch }, Hooks: obs.hooks()})
	require.NoError(t, err)
	c, err := webhook.NewRangeClient(srv.URL, apiKey, v, &webhook.RangeClientOptions{HTTPClient: srv.Client(), Hooks: obs.hooks()})
	require.NoError(t, err)
	tr, err := webhook.NewTracker(&webhook.MemoryCursorStore{}, c, func(context.Context, webhook.Step) error { return nil },
		&webhook.TrackerOptions{Hooks: obs.hooks()})
	require.NoError(t, err)
	rc, err := webhook.NewReceiver(stream, v, tr, &webhook.ReceiverOptions{Hooks: obs.hooks()})
	require.NoError(t, err)

	rec := src.Deliver(rc, stream, 5)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	require.Equal(t, []call[webhook.RangeFetchStartInfo]{{1, webhook.RangeFetchStartInfo{Stream: stream, From: 1, To: 4}}}, obs.fetches)
	require.Equal(t, []call[webhook.VerifyInfo]{
		{1, webhook.VerifyInfo{Result: webhook.VerifyOK}},
		{2, webhook.VerifyInfo{Result: webhook.VerifyOK, RangeResponse: true}},
	}, obs.verified)
	require.Equal(t, webhook.SequenceInfo{Stream: stream, Sequence: 5, Outcome: webhook.Gap, Missing: 4}, obs.sequenced[0].info)
	require.Equal(t, webhook.RangeFetchOK, obs.fetchEnds[0].info.Result)
	require.Equal(t, 4, obs.fetchEnds[0].info.Events)
	require.Equal(t, webhook.ReceiveEndInfo{Stream: stream, Status: 200, Outcome: webhook.Processed, Sequence: 5, Recovered: 4}, obs.ends[0].info)
}

// TestTraceCarrierHidesCredentials: an Observer can read and write trace headers but neither see nor
// replace a signature, an API key or a cookie.
func TestTraceCarrierHidesCredentials(t *testing.T) {
	h := http.Header{}
	h.Set("Traceparent", "00-abc")
	h.Set("Tracestate", "k=v")
	h.Set(webhook.HeaderSignature, "t=1,v1=secretish")
	h.Set("Authorization", "Bearer sk_live")
	h.Set("Proxy-Authorization", "Basic x")
	h.Set("Cookie", "session=1")
	c := webhook.NewTraceCarrier(h)
	require.Equal(t, "00-abc", c.Get("traceparent"))
	require.Equal(t, "k=v", c.Get("TRACESTATE"))
	for _, k := range []string{"x-svc-signature", "authorization", "Proxy-Authorization", "cookie"} {
		require.Empty(t, c.Get(k), k)
		c.Set(k, "replaced")
	}
	require.ElementsMatch(t, []string{"Traceparent", "Tracestate"}, c.Keys())
	require.Equal(t, "Bearer sk_live", h.Get("Authorization"))
	require.Equal(t, "t=1,v1=secretish", h.Get(webhook.HeaderSignature))
	c.Set("traceparent", "00-def")
	require.Equal(t, "00-def", h.Get("Traceparent"))

	var zero webhook.TraceCarrier
	require.Empty(t, zero.Get("traceparent"))
	require.Nil(t, zero.Keys())
	require.NotPanics(t, func() { zero.Set("traceparent", "x") })
}

// TestObserverEnumStrings: the strings are the attribute values otelconv records.
func TestObserverEnumStrings(t *testing.T) {
	var got []string
	for r := range webhook.VerifyTooNew + 2 {
		got = append(got, r.String())
	}
	require.Equal(t, []string{"unknown", "ok", "missing", "malformed", "mismatch", "too_old", "too_new", "unknown"}, got)
	got = nil
	for r := range webhook.RangeFetchCanceled + 2 {
		got = append(got, r.String())
	}
	require.Equal(t, []string{"unknown", "ok", "too_large", "signature", "invalid_response", "problem", "transport", "canceled", "unknown"}, got)
	got = nil
	for o := range webhook.Gap + 2 {
		got = append(got, o.String())
	}
	require.Equal(t, []string{"unknown", "processed", "duplicate", "gap", "unknown"}, got)
	require.Equal(t, "unknown", webhook.Outcome(-1).String())
}

// TestObserverNilCostsNothing: Verify allocates nothing with or without an observer, and the
// Receiver's path allocates the same with no observer as with one that does nothing — so the
// observer's calls themselves cost no allocation.
func TestObserverNilCostsNothing(t *testing.T) {
	if webhook.RaceEnabled {
		t.Skip("the race detector makes sync.Pool drop items, so Verify allocates")
	}
	secret := webhook.NewSecret()
	body, sig := signedDelivery(t, secret, 1, epoch)
	for name, obs := range map[string]*webhook.Hooks{"nil": nil, "empty": {}, "nop": nopHooks()} {
		v, err := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: func() time.Time { return epoch }, Hooks: obs})
		require.NoError(t, err)
		require.Zero(t, testing.AllocsPerRun(100, func() { _ = v.Verify(sig, body) }), name)
		require.Zero(t, testing.AllocsPerRun(100, func() { _ = v.Verify("t=1,v1=00", body) }), name)
	}

	const runs = 100
	bodies, sigs := make([][]byte, runs+2), make([]string, runs+2)
	for i := range bodies {
		bodies[i], sigs[i] = signedDelivery(t, secret, uint64(i+1), epoch)
	}
	allocs := map[string]float64{}
	for name, obs := range map[string]*webhook.Hooks{"nil": nil, "empty": {}, "nop": nopHooks()} {
		rc, _ := newObservedReceiver(t, secret, newSource(t, 0), obs)
		seq := 0
		allocs[name] = testing.AllocsPerRun(runs, func() {
			seq++
			if _, err := rc.Receive(context.Background(), sigs[seq-1], strconv.Itoa(seq), bodies[seq-1]); err != nil {
				panic(fmt.Sprint(seq, err))
			}
		})
		// And a refused delivery, the path a flood of forgeries takes.
		allocs[name+" refused"] = testing.AllocsPerRun(runs, func() {
			_, _ = rc.Receive(context.Background(), "t=1,v1=00", "1", bodies[0])
		})
	}
	require.Equal(t, allocs["nil"], allocs["nop"], "%v", allocs)
	require.Equal(t, allocs["nil"], allocs["empty"], "%v", allocs)
	require.Equal(t, allocs["nil refused"], allocs["nop refused"], "%v", allocs)
	t.Logf("allocations per Receive: %v", allocs)
}

// TestObserverReceiveDuration: a delivery's duration is measured on the Verifier's clock, from
// ReceiveStart to the answer.
func TestObserverReceiveDuration(t *testing.T) {
	secret := webhook.NewSecret()
	clock := &testClock{now: epoch}
	obs := &fakeObserver{}
	v, err := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: clock.Now, Hooks: obs.hooks()})
	require.NoError(t, err)
	tr, err := webhook.NewTracker(&webhook.MemoryCursorStore{}, newSource(t, 0), func(context.Context, webhook.Step) error {
		clock.Advance(40 * time.Millisecond) // processing takes 40 ms
		return nil
	}, &webhook.TrackerOptions{Hooks: obs.hooks()})
	require.NoError(t, err)
	rc, err := webhook.NewReceiver(stream, v, tr, &webhook.ReceiverOptions{Hooks: obs.hooks()})
	require.NoError(t, err)
	body, sig := signedDelivery(t, secret, 1, epoch)
	_, err = rc.Receive(t.Context(), sig, "1", body)
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	rc.ServeHTTP(rec, webhooktest.NewRequestBody("/webhooks", body, 1, epoch, webhook.NewSecret()))
	require.Equal(t, 401, rec.Code)
	require.Len(t, obs.ends, 2)
	require.Equal(t, 40*time.Millisecond, obs.ends[0].info.Duration)
	require.Zero(t, obs.ends[1].info.Duration)
}
