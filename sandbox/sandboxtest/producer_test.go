package sandboxtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/sandbox"
	"github.com/svcplatform/conventions/sandbox/sandboxtest"
	"github.com/svcplatform/conventions/webhook"
)

// start wires a receiver to a fresh producer.
func start(t *testing.T, opts *sandboxtest.Options) (*sandboxtest.Producer, *receiver) {
	t.Helper()
	rc := &receiver{client: &http.Client{}}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	p := sandboxtest.NewProducer(t, srv.URL+"/hooks", opts)
	rc.baseURL, rc.apiKey, rc.secret, rc.endpointID = p.URL, p.APIKey, p.Secret, p.EndpointID
	return p, rc
}

func seqsUpTo(n uint64) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i) + 1
	}
	return out
}

func TestProducerCredentials(t *testing.T) {
	p, _ := start(t, nil)
	k, err := apikey.Parse(p.APIKey)
	require.NoError(t, err)
	require.Equal(t, apikey.Sandbox, k.Environment())
	require.Regexp(t, `^whsec_`, p.Secret)
	require.Regexp(t, `^http://127\.0\.0\.1:\d+$`, p.URL)
	require.Regexp(t, `^we_`, p.EndpointID)
	require.Equal(t, sandboxtest.DefaultLicensee, p.Licensee)
}

func TestProducerDeliversInOrder(t *testing.T) {
	ctx := context.Background()
	p, rc := start(t, nil)
	for i := range 20 {
		ev, err := p.Emit(ctx, "order.created", map[string]int{"n": i})
		require.NoError(t, err)
		require.Equal(t, uint64(i+1), ev.Sequence)
	}
	seqs, rejected, dups, fetches := rc.snapshot()
	require.Equal(t, seqsUpTo(20), seqs)
	require.Zero(t, rejected+dups+fetches)
	require.Empty(t, p.AppliedFaults())
	require.Equal(t, 20, p.Stats().Delivered)

	rc.mu.Lock()
	got := rc.processed[4]
	rc.mu.Unlock()
	require.Equal(t, "order.created", got.Type)
	require.JSONEq(t, `{"n":4}`, string(got.Data))
	require.Equal(t, "v1", got.APIVersion)
}

// The point of the package: under every fault at once, a correct consumer processes every event
// exactly once, in order.
func TestProducerFaultsConsumerLosesNothing(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			ctx := context.Background()
			p, rc := start(t, &sandboxtest.Options{
				Faults: sandbox.Faults{Drop: 0.2, Duplicate: 0.1, Reorder: 0.1, BadSignature: 0.05, Delay: 0.05, DelayMS: 1},
				Rand:   rand.New(rand.NewPCG(seed, seed)),
			})
			const n = 150
			for i := range n {
				_, err := p.Emit(ctx, "order.created", map[string]int{"n": i})
				require.NoError(t, err)
			}
			// A dropped last event is noticed only when another arrives: end with a clean one.
			require.NoError(t, p.SetFaults(sandbox.Faults{}))
			_, err := p.Emit(ctx, "test.end", nil)
			require.NoError(t, err)

			seqs, rejected, dups, fetches := rc.snapshot()
			require.Equal(t, seqsUpTo(n+1), seqs, "every event exactly once, in order")
			require.Positive(t, fetches, "gaps were recovered by range")
			counts := map[sandbox.Fault]int{}
			for _, f := range p.AppliedFaults() {
				counts[f.Fault]++
			}
			for _, f := range []sandbox.Fault{sandbox.FaultDrop, sandbox.FaultDuplicate, sandbox.FaultReorder, sandbox.FaultBadSignature} {
				require.Positive(t, counts[f], "%s was exercised", f)
			}
			require.Equal(t, counts[sandbox.FaultBadSignature], rejected, "every corrupted signature was refused")
			require.Positive(t, dups, "duplicates were acknowledged without reprocessing")
			require.Zero(t, p.Stats().Abandoned, "refused deliveries were retried until they went through")
		})
	}
}

func TestProducerConsumerOutage(t *testing.T) {
	ctx := context.Background()
	p, rc := start(t, &sandboxtest.Options{Retries: 3})
	_, err := p.Emit(ctx, "order.created", nil)
	require.NoError(t, err)
	rc.setDown(true)
	_, err = p.Emit(ctx, "order.created", nil)
	require.NoError(t, err, "an abandoned delivery is not an error of the producer")
	st := p.Stats()
	require.Equal(t, 3, st.Failed, "retried Retries times")
	require.Equal(t, 1, st.Abandoned)

	rc.setDown(false)
	_, err = p.Emit(ctx, "order.created", nil)
	require.NoError(t, err)
	seqs, _, _, fetches := rc.snapshot()
	require.Equal(t, []uint64{1, 2, 3}, seqs, "the abandoned event came back through range retrieval")
	require.Equal(t, 1, fetches)
}

func TestProducerRangeRetrieval(t *testing.T) {
	ctx := context.Background()
	p, _ := start(t, &sandboxtest.Options{Faults: sandbox.Faults{Drop: 1}})
	for range 5 {
		_, err := p.Emit(ctx, "order.created", nil)
		require.NoError(t, err)
	}
	get := func(path, key string) *http.Response {
		req, err := http.NewRequest(http.MethodGet, p.URL+path, nil)
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	path := "/v1/webhook_endpoints/" + p.EndpointID + "/events?from=2&to=4"

	resp := get(path, p.APIKey)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.True(t, verify(resp.Header.Get(webhook.HeaderSignature), body, p.Secret, time.Now()), "the range body is signed")
	var list webhook.EventList
	require.NoError(t, json.Unmarshal(body, &list))
	require.Equal(t, "list", list.Object)
	require.False(t, list.HasMore)
	require.Len(t, list.Data, 3)
	require.Equal(t, uint64(2), list.Data[0].Sequence)

	evs, err := p.Events(ctx)
	require.NoError(t, err)
	require.Len(t, evs, 5)

	tests := []struct {
		name, path, key string
		code            int
	}{
		{"no key", path, "", http.StatusUnauthorized},
		{"malformed key", path, "sk_sandbox_nope", http.StatusUnauthorized},
		{"unknown endpoint", "/v1/webhook_endpoints/we_other/events?from=1", p.APIKey, http.StatusNotFound},
		{"bad query", "/v1/webhook_endpoints/" + p.EndpointID + "/events?from=zero", p.APIKey, http.StatusBadRequest},
		{"unknown route", "/v1/nothing-here", p.APIKey, http.StatusNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := get(tc.path, tc.key)
			require.Equal(t, tc.code, resp.StatusCode)
			require.NoError(t, apierror.CheckResponse(resp))
		})
	}
}

// The producer's API has the sandbox controls, so a consumer can drive faults the way it will
// against the real sandbox.
func TestProducerControlsOverHTTP(t *testing.T) {
	ctx := context.Background()
	p, rc := start(t, nil)
	call := func(method, path, body string) *http.Response {
		req, err := http.NewRequest(method, p.URL+path, bytes.NewBufferString(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+p.APIKey)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	faults := "/v1/sandbox/webhook_endpoints/" + p.EndpointID + "/faults"

	require.Equal(t, http.StatusOK, call(http.MethodPut, faults, `{"drop":1}`).StatusCode)
	_, err := p.Emit(ctx, "order.created", nil)
	require.NoError(t, err)
	seqs, _, _, _ := rc.snapshot()
	require.Empty(t, seqs, "dropped")

	resp := call(http.MethodPut, faults, `{"drop":1.5}`)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.NoError(t, apierror.CheckResponse(resp))
	require.Equal(t, http.StatusNotFound, call(http.MethodPut, "/v1/sandbox/webhook_endpoints/we_other/faults", `{"drop":1}`).StatusCode)

	require.Equal(t, http.StatusNoContent, call(http.MethodPost, "/v1/sandbox/reset", "").StatusCode, "reset clears the faults")
	resp = call(http.MethodPost, "/v1/sandbox/events", `{"type":"order.filled","data":{"id":"ord_1"}}`)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var out struct {
		Data []sandbox.Triggered `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Len(t, out.Data, 1)
	require.Equal(t, uint64(2), out.Data[0].Event.Sequence)

	seqs, _, _, fetches := rc.snapshot()
	require.Equal(t, []uint64{1, 2}, seqs, "the triggered event arrived, and the dropped one was fetched")
	require.Equal(t, 1, fetches)
	rc.mu.Lock()
	require.Equal(t, "order.filled", rc.processed[1].Type)
	rc.mu.Unlock()
}

func TestProducerOptions(t *testing.T) {
	at := time.Now().Truncate(time.Second)
	p, rc := start(t, &sandboxtest.Options{Licensee: "lic_acme", APIVersion: "v2", Now: func() time.Time { return at }})
	require.Equal(t, "lic_acme", p.Licensee)
	ev, err := p.Emit(context.Background(), "order.created", json.RawMessage(`{"raw":true}`))
	require.NoError(t, err)
	require.Equal(t, at.Unix(), ev.Created)
	require.Equal(t, "v2", ev.APIVersion)
	seqs, _, _, _ := rc.snapshot()
	require.Equal(t, []uint64{1}, seqs)
	p.Close()
	p.Close() // idempotent, and t.Cleanup calls it again
}
