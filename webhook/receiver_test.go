package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/webhooktest"
)

type receiverFixture struct {
	secret  string
	src     *webhooktest.Source
	store   *webhook.MemoryCursorStore
	rec     *recorder
	rc      *webhook.Receiver
	logs    *bytes.Buffer
	fetchOK bool
}

func newReceiverFixture(t *testing.T, events int) *receiverFixture {
	t.Helper()
	f := &receiverFixture{secret: webhook.NewSecret(), store: &webhook.MemoryCursorStore{}, rec: &recorder{}, logs: &bytes.Buffer{}, fetchOK: true}
	f.src = webhooktest.NewSource(f.secret, "sk_sandbox_test", &webhooktest.SourceOptions{Now: func() time.Time { return epoch }})
	for i := range events {
		f.src.Emit(stream, "order.created", map[string]int{"n": i + 1})
	}
	v, err := webhook.NewVerifier([]string{f.secret}, &webhook.VerifierOptions{Now: func() time.Time { return epoch }})
	require.NoError(t, err)
	fetch := webhook.RangeFetcherFunc(func(ctx context.Context, s string, from, to uint64) ([]webhook.Event, error) {
		if !f.fetchOK {
			return nil, errors.New("producer unreachable")
		}
		return f.src.FetchRange(ctx, s, from, to)
	})
	tr, err := webhook.NewTracker(f.store, fetch, f.rec.process, nil)
	require.NoError(t, err)
	f.rc, err = webhook.NewReceiver(stream, v, tr, &webhook.ReceiverOptions{
		MaxBodyBytes: 4 << 10,
		Logger:       slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)
	return f
}

func (f *receiverFixture) serve(r *http.Request) *http.Response {
	w := httptest.NewRecorder()
	f.rc.ServeHTTP(w, r)
	return w.Result()
}

func TestNewReceiverValidates(t *testing.T) {
	v, err := webhook.NewVerifier([]string{webhook.NewSecret()}, nil)
	require.NoError(t, err)
	tr, err := webhook.NewTracker(&webhook.MemoryCursorStore{}, newSource(t, 0), (&recorder{}).process, nil)
	require.NoError(t, err)
	_, err = webhook.NewReceiver("", v, tr, nil)
	require.Error(t, err)
	_, err = webhook.NewReceiver(stream, nil, tr, nil)
	require.ErrorIs(t, err, webhook.ErrNoSecret)
	_, err = webhook.NewReceiver(stream, &webhook.Verifier{}, tr, nil)
	require.ErrorIs(t, err, webhook.ErrNoSecret)
	_, err = webhook.NewReceiver(stream, v, nil, nil)
	require.Error(t, err)
	_, err = webhook.NewReceiver(stream, v, tr, &webhook.ReceiverOptions{MaxBodyBytes: -1})
	require.Error(t, err)
}

func TestReceiverAnswers(t *testing.T) {
	type located struct{ location, name, pointer string }
	cases := []struct {
		name     string
		setup    func(f *receiverFixture)
		request  func(f *receiverFixture) *http.Request
		status   int
		code     string
		at       []located
		outcome  string
		header   map[string]string
		resolved []uint64 // processed afterwards
	}{
		{
			name:     "next event",
			request:  func(f *receiverFixture) *http.Request { return f.src.Request("/hook", stream, 1) },
			status:   http.StatusOK,
			outcome:  "processed",
			resolved: []uint64{1},
		},
		{
			name:     "gap is recovered",
			request:  func(f *receiverFixture) *http.Request { return f.src.Request("/hook", stream, 3) },
			status:   http.StatusOK,
			outcome:  "processed",
			resolved: []uint64{1, 2, 3},
		},
		{
			name: "duplicate",
			setup: func(f *receiverFixture) {
				require.NoError(t, f.store.Advance(context.Background(), stream, 0, 2))
			},
			request: func(f *receiverFixture) *http.Request { return f.src.Request("/hook", stream, 2) },
			status:  http.StatusOK,
			outcome: "duplicate",
		},
		{
			name: "GET",
			request: func(f *receiverFixture) *http.Request {
				return httptest.NewRequest(http.MethodGet, "/hook", nil)
			},
			status: http.StatusMethodNotAllowed,
			code:   "method_not_allowed",
			header: map[string]string{"Allow": "POST"},
		},
		{
			name: "missing signature",
			request: func(f *receiverFixture) *http.Request {
				r := f.src.Request("/hook", stream, 1)
				r.Header.Del(webhook.HeaderSignature)
				return r
			},
			status: http.StatusBadRequest,
			code:   apierror.CodeHeaderMissing,
			at:     []located{{"header", webhook.HeaderSignature, ""}},
		},
		{
			name: "malformed signature",
			request: func(f *receiverFixture) *http.Request {
				r := f.src.Request("/hook", stream, 1)
				r.Header.Set(webhook.HeaderSignature, "sha256=abc")
				return r
			},
			status: http.StatusBadRequest,
			code:   webhook.CodeSignatureInvalid,
			at:     []located{{"header", webhook.HeaderSignature, ""}},
		},
		{
			name: "duplicate timestamp",
			request: func(f *receiverFixture) *http.Request {
				r := f.src.Request("/hook", stream, 1)
				r.Header.Set(webhook.HeaderSignature, "t=1,"+r.Header.Get(webhook.HeaderSignature))
				return r
			},
			status: http.StatusBadRequest,
			code:   webhook.CodeSignatureInvalid,
			at:     []located{{"header", webhook.HeaderSignature, ""}},
		},
		{
			name: "wrong secret",
			request: func(f *receiverFixture) *http.Request {
				return webhooktest.NewRequest("/hook", f.src.Event(stream, 1), epoch, webhook.NewSecret())
			},
			status: http.StatusUnauthorized,
			code:   webhook.CodeSignatureMismatch,
			at:     []located{{"header", webhook.HeaderSignature, ""}},
			header: map[string]string{"WWW-Authenticate": `HMAC-SHA256 header="X-SVC-Signature"`},
		},
		{
			name: "body altered after signing",
			request: func(f *receiverFixture) *http.Request {
				ev := f.src.Event(stream, 1)
				body := webhooktest.Body(ev)
				r := webhooktest.NewRequestBody("/hook", body, 1, epoch, f.secret)
				// The same JSON value, re-indented: a framework that re-encodes the body breaks this.
				var pretty bytes.Buffer
				require.NoError(t, json.Indent(&pretty, body, "", " "))
				r.Body = io.NopCloser(&pretty)
				r.ContentLength = int64(pretty.Len())
				return r
			},
			status: http.StatusUnauthorized,
			code:   webhook.CodeSignatureMismatch,
		},
		{
			name: "too old",
			request: func(f *receiverFixture) *http.Request {
				return webhooktest.NewRequest("/hook", f.src.Event(stream, 1), epoch.Add(-301*time.Second), f.secret)
			},
			status: http.StatusUnauthorized,
			code:   webhook.CodeSignatureTooOld,
		},
		{
			name: "too new",
			request: func(f *receiverFixture) *http.Request {
				return webhooktest.NewRequest("/hook", f.src.Event(stream, 1), epoch.Add(301*time.Second), f.secret)
			},
			status: http.StatusUnauthorized,
			code:   webhook.CodeSignatureTooNew,
		},
		{
			name: "missing sequence",
			request: func(f *receiverFixture) *http.Request {
				r := f.src.Request("/hook", stream, 1)
				r.Header.Del(webhook.HeaderSequence)
				return r
			},
			status: http.StatusBadRequest,
			code:   apierror.CodeHeaderMissing,
			at:     []located{{"header", webhook.HeaderSequence, ""}},
		},
		{
			name: "malformed sequence",
			request: func(f *receiverFixture) *http.Request {
				r := f.src.Request("/hook", stream, 1)
				r.Header.Set(webhook.HeaderSequence, "01")
				return r
			},
			status: http.StatusBadRequest,
			code:   webhook.CodeSequenceInvalid,
			at:     []located{{"header", webhook.HeaderSequence, ""}},
		},
		{
			name: "sequence mismatch",
			request: func(f *receiverFixture) *http.Request {
				r := f.src.Request("/hook", stream, 1)
				r.Header.Set(webhook.HeaderSequence, "2")
				return r
			},
			status: http.StatusBadRequest,
			code:   webhook.CodeSequenceMismatch,
			at:     []located{{"header", webhook.HeaderSequence, ""}, {"body", "", "/sequence"}},
		},
		{
			name: "signed body that is not JSON",
			request: func(f *receiverFixture) *http.Request {
				return webhooktest.NewRequestBody("/hook", []byte(`{"id":`), 1, epoch, f.secret)
			},
			status: http.StatusBadRequest,
			code:   apierror.CodeMalformedJSON,
			at:     []located{{"body", "", ""}},
		},
		{
			// Signed, so not forged: but a body whose members disagree with themselves is never read
			// one way by the consumer and another by a proxy or a log.
			name: "signed body that repeats its sequence",
			request: func(f *receiverFixture) *http.Request {
				return webhooktest.NewRequestBody("/hook", []byte(`{"object":"event","id":"evt_1","sequence":1,"type":"order.created","sequence":2}`), 1, epoch, f.secret)
			},
			status: http.StatusBadRequest,
			code:   apierror.CodeDuplicateMember,
			at:     []located{{"body", "", "/sequence"}},
		},
		{
			name: "signed body with invalid UTF-8",
			request: func(f *receiverFixture) *http.Request {
				return webhooktest.NewRequestBody("/hook", []byte("{\"id\":\"evt_\xff\",\"sequence\":1,\"type\":\"order.created\"}"), 1, epoch, f.secret)
			},
			status: http.StatusBadRequest,
			code:   apierror.CodeInvalidUTF8,
			at:     []located{{"body", "", "/id"}},
		},
		{
			name: "signed body without a type",
			request: func(f *receiverFixture) *http.Request {
				return webhooktest.NewRequestBody("/hook", []byte(`{"id":"evt_1","sequence":1}`), 1, epoch, f.secret)
			},
			status: http.StatusBadRequest,
			code:   apierror.CodeFieldMissing,
			at:     []located{{"body", "", "/type"}},
		},
		{
			name: "signed empty body",
			request: func(f *receiverFixture) *http.Request {
				return webhooktest.NewRequestBody("/hook", nil, 1, epoch, f.secret)
			},
			status: http.StatusBadRequest,
			code:   apierror.CodeBodyMissing,
		},
		{
			name: "body over the cap, announced",
			request: func(f *receiverFixture) *http.Request {
				return webhooktest.NewRequestBody("/hook", bytes.Repeat([]byte("x"), 5<<10), 1, epoch, f.secret)
			},
			status: http.StatusRequestEntityTooLarge,
			code:   apierror.CodeBodyTooLarge,
		},
		{
			name: "body over the cap, streamed",
			request: func(f *receiverFixture) *http.Request {
				r := webhooktest.NewRequestBody("/hook", bytes.Repeat([]byte("x"), 5<<10), 1, epoch, f.secret)
				r.ContentLength = -1
				r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(bytes.Repeat([]byte("x"), 5<<10))))
				return r
			},
			status: http.StatusRequestEntityTooLarge,
			code:   apierror.CodeBodyTooLarge,
		},
		{
			name:    "gap fetch fails",
			setup:   func(f *receiverFixture) { f.fetchOK = false },
			request: func(f *receiverFixture) *http.Request { return f.src.Request("/hook", stream, 3) },
			status:  http.StatusServiceUnavailable,
			code:    webhook.CodeDeliveryFailed,
			header:  map[string]string{"Retry-After": "10"},
		},
		{
			name:    "processing fails",
			setup:   func(f *receiverFixture) { f.rec.failOn = map[uint64]int{1: 1} },
			request: func(f *receiverFixture) *http.Request { return f.src.Request("/hook", stream, 1) },
			status:  http.StatusServiceUnavailable,
			code:    webhook.CodeDeliveryFailed,
			header:  map[string]string{"Retry-After": "10"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newReceiverFixture(t, 5)
			if tc.setup != nil {
				tc.setup(f)
			}
			req := tc.request(f)
			sig := req.Header.Get(webhook.HeaderSignature)
			resp := f.serve(req)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, tc.status, resp.StatusCode, "%s", body)
			for k, v := range tc.header {
				require.Equal(t, v, resp.Header.Get(k), k)
			}
			// Never a secret or a signature in a response or a log line.
			for _, out := range []string{string(body), f.logs.String()} {
				require.NotContains(t, out, f.secret)
				if i := strings.Index(sig, "v1="); i >= 0 {
					require.NotContains(t, out, sig[i+3:])
				}
			}
			if tc.status == http.StatusOK {
				var out struct {
					Sequence  uint64 `json:"sequence"`
					Outcome   string `json:"outcome"`
					Recovered int    `json:"recovered"`
				}
				require.NoError(t, json.Unmarshal(body, &out))
				require.Equal(t, tc.outcome, out.Outcome)
				require.Equal(t, tc.resolved, f.rec.processed())
				return
			}
			require.Empty(t, f.rec.processed(), "nothing is processed from a refused delivery")
			resp.Body = io.NopCloser(bytes.NewReader(body))
			require.NoError(t, apierror.CheckResponse(resp))
			var p apierror.Error
			require.NoError(t, json.Unmarshal(body, &p))
			require.Equal(t, tc.code, p.Code)
			if len(tc.at) > 0 {
				require.Len(t, p.Errors, len(tc.at))
			}
			for i, at := range tc.at {
				require.Equal(t, apierror.Location(at.location), p.Errors[i].Location)
				require.Equal(t, at.name, p.Errors[i].Name)
				require.Equal(t, at.pointer, p.Errors[i].Pointer)
			}
			if tc.status == http.StatusServiceUnavailable {
				require.NotContains(t, string(body), "producer unreachable", "5xx bodies carry no internal detail")
				require.NotContains(t, string(body), "injected")
				require.Contains(t, f.logs.String(), "delivery refused with 503")
			}
		})
	}
}

// A delivery captured on its way to one endpoint, replayed to another endpoint that shares its secret,
// is refused: the signed body names the endpoint it was meant for.
func TestReceiverRefusesADeliveryForAnotherEndpoint(t *testing.T) {
	f := newReceiverFixture(t, 1)
	f.src.Emit("we_other", "order.created", map[string]int{"n": 1})
	resp := f.serve(f.src.Request("/hook", "we_other", 1))
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	body, _ := io.ReadAll(resp.Body)
	require.Contains(t, string(body), `"code":"endpoint_mismatch"`)
	require.Contains(t, string(body), `"pointer":"/endpoint"`)
	require.Empty(t, f.rec.processed(), "nothing processed")

	// Its own delivery goes through.
	require.Equal(t, http.StatusOK, f.serve(f.src.Request("/hook", stream, 1)).StatusCode)
}

func TestReceiverRecoversAfter503(t *testing.T) {
	f := newReceiverFixture(t, 5)
	f.fetchOK = false
	require.Equal(t, http.StatusServiceUnavailable, f.serve(f.src.Request("/hook", stream, 4)).StatusCode)
	require.Empty(t, f.rec.processed())
	f.fetchOK = true
	require.Equal(t, http.StatusOK, f.serve(f.src.Request("/hook", stream, 4)).StatusCode) // the producer's retry
	require.Equal(t, seqRange(1, 4), f.rec.processed())
}

func TestReceiverConcurrentDeliveries(t *testing.T) {
	f := newReceiverFixture(t, 200)
	var wg sync.WaitGroup
	for seq := uint64(200); seq >= 1; seq-- {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if code := f.serve(f.src.Request("/hook", stream, seq)).StatusCode; code != http.StatusOK {
					t.Errorf("sequence %d: status %d", seq, code)
				}
			}()
		}
	}
	wg.Wait()
	require.Equal(t, seqRange(1, 200), f.rec.processed())
}

// TestReceiverEndToEnd runs the whole consumer over HTTP: deliveries to a Receiver whose Tracker
// fetches gaps with a RangeClient from the producer's signed range endpoint, with dropped, duplicated
// and reordered deliveries and failing range requests.
func TestReceiverEndToEnd(t *testing.T) {
	const n = 500
	secret := webhook.NewSecret()
	src := webhooktest.NewSource(secret, "sk_sandbox_e2e", &webhooktest.SourceOptions{Now: func() time.Time { return epoch }})
	for i := range n {
		src.Emit(stream, "order.created", map[string]int{"n": i + 1})
	}
	producer := httptest.NewServer(src)
	t.Cleanup(producer.Close)

	v, err := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: func() time.Time { return epoch }})
	require.NoError(t, err)
	client, err := webhook.NewRangeClient(producer.URL, "sk_sandbox_e2e", v, &webhook.RangeClientOptions{PageSize: 7, HTTPClient: producer.Client()})
	require.NoError(t, err)
	rec := &recorder{}
	tr, err := webhook.NewTracker(&webhook.MemoryCursorStore{}, client, rec.process, &webhook.TrackerOptions{FetchBatch: 20})
	require.NoError(t, err)
	rc, err := webhook.NewReceiver(stream, v, tr, nil)
	require.NoError(t, err)
	consumer := httptest.NewServer(rc)
	t.Cleanup(consumer.Close)

	var order []uint64
	for seq := uint64(1); seq <= n; seq++ {
		switch seq % 10 {
		case 3: // dropped
		case 5, 6: // duplicated
			order = append(order, seq, seq)
		default:
			order = append(order, seq)
		}
	}
	for i := 0; i+1 < len(order); i += 4 { // pairwise swaps: reordering
		order[i], order[i+1] = order[i+1], order[i]
	}
	order = append(order, n) // the last one must arrive for the tail to be recovered
	failed := 0
	for i, seq := range order {
		if i%25 == 0 {
			src.FailFetches(1)
		}
		for {
			r := src.Request(consumer.URL+"/hook", stream, seq)
			r.RequestURI = ""
			resp, err := consumer.Client().Do(r)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			failed++
		}
	}
	require.Equal(t, seqRange(1, n), rec.processed())
	require.Positive(t, failed, "some range requests failed and were retried")
}
