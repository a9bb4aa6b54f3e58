package sandbox

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/internal/syncbuf"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
)

func TestFaultsValidate(t *testing.T) {
	tests := []struct {
		name     string
		f        Faults
		pointers []string
	}{
		{"zero", Faults{}, nil},
		{"the documented example", Faults{Drop: 0.2, Duplicate: 0.1, Reorder: 0.1, BadSignature: 0.05}, nil},
		{"all certain", Faults{Drop: 1, Duplicate: 1, Reorder: 1, BadSignature: 1, Delay: 1, DelayMS: MaxFaultDelay.Milliseconds()}, nil},
		{"negative drop", Faults{Drop: -0.1}, []string{"/drop"}},
		{"duplicate above 1", Faults{Duplicate: 1.5}, []string{"/duplicate"}},
		{"NaN reorder", Faults{Reorder: math.NaN()}, []string{"/reorder"}},
		{"infinite bad signature", Faults{BadSignature: math.Inf(1)}, []string{"/bad_signature"}},
		{"delay above bound", Faults{Delay: 0.5, DelayMS: MaxFaultDelay.Milliseconds() + 1}, []string{"/delay_ms"}},
		{"negative delay", Faults{Delay: 0.5, DelayMS: -1}, []string{"/delay_ms"}},
		{"delay rate without duration", Faults{Delay: 0.5}, []string{"/delay_ms"}},
		{"duration without delay rate", Faults{DelayMS: 100}, []string{"/delay"}},
		{"several at once", Faults{Drop: 2, Reorder: -1, Delay: 3, DelayMS: 10}, []string{"/drop", "/reorder", "/delay"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.f.Validate()
			if tc.pointers == nil {
				require.NoError(t, err)
				return
			}
			var p *apierror.Error
			require.ErrorAs(t, err, &p)
			require.Equal(t, http.StatusBadRequest, p.Status)
			var got []string
			for _, v := range p.Errors {
				require.Equal(t, apierror.LocationBody, v.Location)
				got = append(got, v.Pointer)
			}
			require.Equal(t, tc.pointers, got)
		})
	}
}

func TestFaultTable(t *testing.T) {
	var ft FaultTable
	require.Equal(t, Faults{}, ft.FaultsFor("we_1"))
	f := Faults{Drop: 0.5}
	require.NoError(t, ft.Set("we_1", f))
	require.Equal(t, f, ft.FaultsFor("we_1"))
	require.Equal(t, Faults{}, ft.FaultsFor("we_2"))
	require.Error(t, ft.Set("we_1", Faults{Drop: 2}))
	require.Equal(t, f, ft.FaultsFor("we_1"), "an invalid Set changes nothing")
	require.NoError(t, ft.Set("we_1", Faults{}))
	require.Equal(t, Faults{}, ft.FaultsFor("we_1"))
	require.NoError(t, ft.Set("we_2", f))
	ft.Clear("we_2", "we_3")
	require.Equal(t, Faults{}, ft.FaultsFor("we_2"))
}

const testSecret = "whsec_test-secret-for-the-fault-transport"

// verifySignature is a consumer's check of X-SVC-Signature, written from the spec.
func verifySignature(header string, body []byte, secret string) bool {
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range sigs {
		got, err := hex.DecodeString(s)
		if err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

// sent is one request that reached the base transport.
type sent struct {
	endpoint string
	seq      uint64
	body     string
	sigOK    bool
	at       time.Time
}

// recorder is a base transport that records what reaches it and answers 200.
type recorder struct {
	mu   sync.Mutex
	sent []sent
}

func (rc *recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		_ = r.Body.Close()
	}
	seq, _ := strconv.ParseUint(r.Header.Get(webhook.HeaderSequence), 10, 64)
	id, _ := dispatcherEndpoint(r)
	rc.mu.Lock()
	rc.sent = append(rc.sent, sent{endpoint: id, seq: seq, body: string(body),
		sigOK: verifySignature(r.Header.Get(webhook.HeaderSignature), body, testSecret), at: time.Now()})
	rc.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
}

func (rc *recorder) seqs() []uint64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make([]uint64, 0, len(rc.sent))
	for _, s := range rc.sent {
		out = append(out, s.seq)
	}
	return out
}

func (rc *recorder) all() []sent {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.sent)
}

// delivery builds a signed webhook delivery of seq to the endpoint.
func delivery(t testing.TB, ctx context.Context, endpoint string, seq uint64) *http.Request {
	t.Helper()
	body := []byte(`{"id":"evt_` + strconv.FormatUint(seq, 10) + `","sequence":` + strconv.FormatUint(seq, 10) + `,"type":"order.created","created":1767225600,"api_version":"v1","data":{}}`)
	sig, err := webhook.Sign(body, time.Unix(1767225600, 0), testSecret)
	require.NoError(t, err)
	r, err := http.NewRequestWithContext(producer.NewEndpointIDContext(ctx, endpoint), http.MethodPost, "http://consumer.test/hooks", bytes.NewReader(body))
	require.NoError(t, err)
	r.Header.Set(webhook.HeaderSignature, sig)
	r.Header.Set(webhook.HeaderSequence, strconv.FormatUint(seq, 10))
	return r
}

func roundTrip(t testing.TB, tr http.RoundTripper, r *http.Request) *http.Response {
	t.Helper()
	resp, err := tr.RoundTrip(r)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp
}

func TestFaultTransportPassesThrough(t *testing.T) {
	rc := &recorder{}
	var ft FaultTable
	require.NoError(t, ft.Set("we_faulty", Faults{Drop: 1}))
	tr := must(NewFaultTransport(rc, &ft, nil))
	defer tr.Close()

	// Not a delivery (no endpoint in the context), and a delivery to an endpoint without faults.
	r, err := http.NewRequest(http.MethodGet, "http://producer.test/v1/webhook_endpoints/we_faulty/events", nil)
	require.NoError(t, err)
	roundTrip(t, tr, r)
	resp := roundTrip(t, tr, delivery(t, context.Background(), "we_clean", 1))
	require.Empty(t, resp.Header.Get(HeaderSandboxFault))
	require.Len(t, rc.all(), 2)
	require.True(t, rc.all()[1].sigOK)
}

func TestFaultTransportFaults(t *testing.T) {
	tests := []struct {
		name   string
		faults Faults
		check  func(t *testing.T, resp *http.Response, got []sent, events []FaultEvent)
	}{
		{"drop answers 200 without sending", Faults{Drop: 1, Duplicate: 1, BadSignature: 1}, func(t *testing.T, resp *http.Response, got []sent, events []FaultEvent) {
			require.Empty(t, got)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "drop", resp.Header.Get(HeaderSandboxFault))
			require.Contains(t, faultNotes[FaultDrop], "not sent", "the delivery history shows the fault")
			require.Equal(t, int64(len(faultNotes[FaultDrop])), resp.ContentLength, "the answer carries the note")
			require.Equal(t, []FaultEvent{{EndpointID: "we_1", Sequence: 7, Fault: FaultDrop}}, events, "a dropped delivery suffers nothing else")
		}},
		{"duplicate sends twice", Faults{Duplicate: 1}, func(t *testing.T, resp *http.Response, got []sent, events []FaultEvent) {
			require.Len(t, got, 2)
			require.Equal(t, got[0].body, got[1].body)
			require.True(t, got[0].sigOK && got[1].sigOK)
			require.Empty(t, resp.Header.Get(HeaderSandboxFault), "the producer gets the consumer's real answer")
			require.Equal(t, []FaultEvent{{EndpointID: "we_1", Sequence: 7, Fault: FaultDuplicate}}, events)
		}},
		{"bad signature fails verification", Faults{BadSignature: 1}, func(t *testing.T, resp *http.Response, got []sent, events []FaultEvent) {
			require.Len(t, got, 1)
			require.False(t, got[0].sigOK)
			require.Equal(t, []FaultEvent{{EndpointID: "we_1", Sequence: 7, Fault: FaultBadSignature}}, events)
		}},
		{"bad signature stays bad on the duplicate", Faults{BadSignature: 1, Duplicate: 1}, func(t *testing.T, resp *http.Response, got []sent, events []FaultEvent) {
			require.Len(t, got, 2)
			require.False(t, got[0].sigOK)
			require.False(t, got[1].sigOK)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rc := &recorder{}
			var ft FaultTable
			require.NoError(t, ft.Set("we_1", tc.faults))
			var mu sync.Mutex
			var events []FaultEvent
			tr := must(NewFaultTransport(rc, &ft, &FaultTransportOptions{OnFault: func(e FaultEvent) {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			}}))
			defer tr.Close()
			resp := roundTrip(t, tr, delivery(t, context.Background(), "we_1", 7))
			tc.check(t, resp, rc.all(), events)
		})
	}
}

func TestFaultTransportDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &recorder{}
		var ft FaultTable
		require.NoError(t, ft.Set("we_1", Faults{Delay: 1, DelayMS: 1500}))
		tr := must(NewFaultTransport(rc, &ft, nil))
		defer tr.Close()
		start := time.Now()
		roundTrip(t, tr, delivery(t, context.Background(), "we_1", 1))
		got := rc.all()
		require.Len(t, got, 1)
		require.Equal(t, 1500*time.Millisecond, got[0].at.Sub(start))

		// A producer that gives up while the delivery is delayed gets its context's error, and
		// nothing is sent.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := tr.RoundTrip(delivery(t, ctx, "we_1", 2))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Len(t, rc.all(), 1)
	})
}

func TestFaultTransportReorder(t *testing.T) {
	t.Run("held until the next delivery", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rc := &recorder{}
			var ft FaultTable
			tr := must(NewFaultTransport(rc, &ft, nil))
			defer tr.Close()
			require.NoError(t, ft.Set("we_1", Faults{Reorder: 1}))
			// The producer cancels its request context as soon as it has an answer; the held
			// delivery must still go out later.
			ctx, cancel := context.WithCancel(context.Background())
			resp := roundTrip(t, tr, delivery(t, ctx, "we_1", 1))
			cancel()
			require.Equal(t, "reorder", resp.Header.Get(HeaderSandboxFault))
			roundTrip(t, tr, delivery(t, context.Background(), "we_2", 1)) // other endpoints are not affected
			require.Equal(t, []uint64{1}, rc.seqs(), "only we_2's delivery so far")
			require.NoError(t, ft.Set("we_1", Faults{}))
			roundTrip(t, tr, delivery(t, context.Background(), "we_1", 2))
			got := rc.all()
			require.Len(t, got, 3)
			require.Equal(t, []sent{got[1], got[2]}, []sent{{endpoint: "we_1", seq: 2, body: got[1].body, sigOK: true, at: got[1].at},
				{endpoint: "we_1", seq: 1, body: got[2].body, sigOK: true, at: got[2].at}}, "2 arrives before 1")
		})
	})
	t.Run("several held keep their order", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rc := &recorder{}
			var ft FaultTable
			tr := must(NewFaultTransport(rc, &ft, nil))
			defer tr.Close()
			require.NoError(t, ft.Set("we_1", Faults{Reorder: 1}))
			for seq := uint64(1); seq <= 3; seq++ {
				roundTrip(t, tr, delivery(t, context.Background(), "we_1", seq))
			}
			require.NoError(t, ft.Set("we_1", Faults{Drop: 1}))
			roundTrip(t, tr, delivery(t, context.Background(), "we_1", 4)) // dropped, but flushes the held ones
			require.Equal(t, []uint64{1, 2, 3}, rc.seqs())
		})
	})
	t.Run("sent when the hold ends", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rc := &recorder{}
			var ft FaultTable
			require.NoError(t, ft.Set("we_1", Faults{Reorder: 1}))
			tr := must(NewFaultTransport(rc, &ft, &FaultTransportOptions{HoldFor: 2 * time.Second}))
			defer tr.Close()
			start := time.Now()
			roundTrip(t, tr, delivery(t, context.Background(), "we_1", 1))
			time.Sleep(2 * time.Second) // virtual time inside the synctest bubble
			synctest.Wait()
			got := rc.all()
			require.Len(t, got, 1)
			require.Equal(t, 2*time.Second, got[0].at.Sub(start))
		})
	})
	t.Run("sent on Close", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rc := &recorder{}
			var ft FaultTable
			require.NoError(t, ft.Set("we_1", Faults{Reorder: 1}))
			tr := must(NewFaultTransport(rc, &ft, nil))
			roundTrip(t, tr, delivery(t, context.Background(), "we_1", 1))
			roundTrip(t, tr, delivery(t, context.Background(), "we_2", 5))
			require.Equal(t, []uint64{5}, rc.seqs(), "we_1's delivery is held")
			require.NoError(t, tr.Close())
			require.Equal(t, []uint64{5, 1}, rc.seqs())
			require.ErrorIs(t, tr.Close(), ErrTransportClosed)

			// After Close nothing is held any more.
			roundTrip(t, tr, delivery(t, context.Background(), "we_1", 2))
			require.Equal(t, []uint64{5, 1, 2}, rc.seqs())
		})
	})
}

// failingBase fails every round trip.
type failingBase struct{}

func (failingBase) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("connection refused")
}

func TestFaultTransportHeldSendFailureIsLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logger, logs := syncbuf.Logger()
		var ft FaultTable
		require.NoError(t, ft.Set("we_1", Faults{Reorder: 1}))
		tr := must(NewFaultTransport(failingBase{}, &ft, &FaultTransportOptions{Logger: logger}))
		roundTrip(t, tr, delivery(t, context.Background(), "we_1", 1))
		require.NoError(t, tr.Close())
		require.Contains(t, logs.String(), "connection refused")
		require.NotContains(t, logs.String(), testSecret)
	})
}

// The rates are honoured, and a seeded generator reproduces a run exactly.
func TestFaultTransportSeededRates(t *testing.T) {
	run := func(seed uint64) (map[Fault]int, []FaultEvent) {
		rc := &recorder{}
		var ft FaultTable
		require.NoError(t, ft.Set("we_1", Faults{Drop: 0.2, Duplicate: 0.1, BadSignature: 0.05}))
		var events []FaultEvent
		tr := must(NewFaultTransport(rc, &ft, &FaultTransportOptions{
			Rand:    rand.New(rand.NewPCG(seed, 42)),
			OnFault: func(e FaultEvent) { events = append(events, e) },
		}))
		defer tr.Close()
		for seq := uint64(1); seq <= 4000; seq++ {
			roundTrip(t, tr, delivery(t, context.Background(), "we_1", seq))
		}
		counts := map[Fault]int{}
		for _, e := range events {
			counts[e.Fault]++
		}
		return counts, events
	}
	counts, events := run(1)
	_, again := run(1)
	require.Equal(t, events, again, "same seed, same faults")
	_, other := run(2)
	require.NotEqual(t, events, other)

	const n = 4000.0
	within := func(f Fault, want float64) {
		got := float64(counts[f])
		require.InDelta(t, want, got, want*0.25, "%s: %v of %v", f, got, n)
	}
	within(FaultDrop, 0.2*n)
	within(FaultDuplicate, 0.1*0.8*n) // only deliveries that were not dropped
	within(FaultBadSignature, 0.05*0.8*n)
	require.Zero(t, counts[FaultReorder])
	require.Zero(t, counts[FaultDelay])
}

func TestCorruptSignature(t *testing.T) {
	body := []byte(`{"sequence":1}`)
	rotating, err := webhook.Sign(body, time.Unix(100, 0), testSecret, "whsec_other")
	require.NoError(t, err)
	tests := []struct {
		name string
		in   string
	}{
		{"none", ""},
		{"one v1", "t=100,v1=" + strings.Repeat("a0", 32)},
		{"rotation", rotating},
		{"no v1", "t=100"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := corruptSignature(tc.in)
			require.NotEqual(t, tc.in, out)
			require.False(t, verifySignature(out, body, testSecret))
			require.False(t, verifySignature(out, body, "whsec_other"))
			require.True(t, strings.HasPrefix(out, "t="), out)
			require.Contains(t, out, ",v1=")
			require.Equal(t, max(strings.Count(tc.in, "v1="), 1), strings.Count(out, "v1="), "every v1 corrupted, one added if none")
		})
	}
	require.True(t, verifySignature(rotating, body, "whsec_other"), "the test's verifier accepts a rotated signature")
}

func TestFaultTransportFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := &recorder{}
		var ft FaultTable
		require.NoError(t, ft.Set("we_1", Faults{Reorder: 1}))
		require.NoError(t, ft.Set("we_2", Faults{Reorder: 1}))
		tr := must(NewFaultTransport(rc, &ft, nil))
		defer tr.Close()
		for seq := uint64(1); seq <= 3; seq++ {
			roundTrip(t, tr, delivery(t, context.Background(), "we_1", seq))
			roundTrip(t, tr, delivery(t, context.Background(), "we_2", seq+10))
		}
		require.Empty(t, rc.all())
		start := time.Now()
		tr.Flush()
		require.Zero(t, time.Since(start), "Flush does not wait for the hold time")
		var we1, we2 []uint64
		for _, s := range rc.all() {
			if s.endpoint == "we_1" {
				we1 = append(we1, s.seq)
			} else {
				we2 = append(we2, s.seq)
			}
		}
		require.Equal(t, []uint64{1, 2, 3}, we1)
		require.Equal(t, []uint64{11, 12, 13}, we2)
		tr.Flush() // nothing left: a no-op
		require.Len(t, rc.all(), 6)
	})
}

// Under concurrency — several endpoints, hold timers firing while deliveries flush — every delivery
// is sent exactly once and nothing is held after Close.
func TestFaultTransportConcurrentNothingLost(t *testing.T) {
	rc := &recorder{}
	var ft FaultTable
	const endpoints, perEndpoint = 4, 150
	for e := range endpoints {
		require.NoError(t, ft.Set("we_"+strconv.Itoa(e), Faults{Reorder: 0.5}))
	}
	tr := must(NewFaultTransport(rc, &ft, &FaultTransportOptions{HoldFor: time.Millisecond, Rand: rand.New(rand.NewPCG(7, 7))}))
	var wg sync.WaitGroup
	for e := range endpoints {
		wg.Go(func() {
			for seq := uint64(1); seq <= perEndpoint; seq++ {
				roundTrip(t, tr, delivery(t, context.Background(), "we_"+strconv.Itoa(e), seq))
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			tr.Flush()
		}
	})
	wg.Wait()
	require.NoError(t, tr.Close())
	seen := map[string]int{}
	for _, s := range rc.all() {
		seen[s.endpoint+"/"+strconv.FormatUint(s.seq, 10)]++
		require.True(t, s.sigOK)
	}
	require.Len(t, seen, endpoints*perEndpoint)
	for k, n := range seen {
		require.Equal(t, 1, n, k)
	}
}
