package webhook_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook"
)

// lazyProducer serves the range endpoint of one stream of last events, each dataSize bytes of data,
// building every page when it is asked for: the test process holds at most one page of the producer's.
type lazyProducer struct {
	secret   string
	stream   string
	last     uint64
	dataSize int
	endpoint func(seq uint64) string // the endpoint each event names; nil: the stream
	pages    atomic.Int64
}

func (p *lazyProducer) event(seq uint64) webhook.Event {
	pad := strings.Repeat("x", max(p.dataSize-len(`{"n":,"pad":""}`)-20, 0))
	ep := p.stream
	if p.endpoint != nil {
		ep = p.endpoint(seq)
	}
	return webhook.Event{ID: "evt_" + strconv.FormatUint(seq, 10), Endpoint: ep, Sequence: seq, Type: "order.created",
		Created: epoch.Unix(), APIVersion: "v1", Data: []byte(`{"n":` + strconv.FormatUint(seq, 10) + `,"pad":"` + pad + `"}`)}
}

func (p *lazyProducer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.pages.Add(1)
	q := r.URL.Query()
	from, _ := strconv.ParseUint(q.Get("from"), 10, 64)
	to, _ := strconv.ParseUint(q.Get("to"), 10, 64)
	limit, _ := strconv.ParseUint(q.Get("limit"), 10, 64)
	end := min(to, p.last, from+limit-1)
	var b bytes.Buffer
	b.WriteString(`{"object":"list","data":[`)
	for seq := from; seq <= end; seq++ {
		if seq > from {
			b.WriteByte(',')
		}
		ev := p.event(seq)
		fmt.Fprintf(&b, `{"id":%q,"endpoint":%q,"sequence":%d,"type":%q,"created":%d,"api_version":%q,"data":%s}`,
			ev.ID, ev.Endpoint, ev.Sequence, ev.Type, ev.Created, ev.APIVersion, ev.Data)
	}
	fmt.Fprintf(&b, `],"has_more":%t}`, end < min(to, p.last))
	sig, _ := webhook.Sign(b.Bytes(), epoch, p.secret)
	w.Header().Set(webhook.HeaderSignature, sig)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b.Bytes())
}

// heapPeak samples the live heap until stop is called and returns its peak above the baseline taken
// at the start (after a collection).
func heapPeak(t *testing.T) (stop func() uint64) {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var (
		peak atomic.Uint64
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > base && ms.HeapAlloc-base > peak.Load() {
				peak.Store(ms.HeapAlloc - base)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load()
	}
}

// A 10,000-event gap of 1 KiB events is fetched and processed page by page: the consumer never holds
// the gap, and its heap stays far below what the whole gap (and a whole-gap fetch) would take.
func TestGapOfTenThousandEventsKeepsTheConsumerSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap over a 10,000-event gap")
	}
	const gap = 10_000
	secret := webhook.NewSecret()
	prod := &lazyProducer{secret: secret, stream: "we_big", last: gap + 1, dataSize: 1 << 10}
	srv := httptest.NewServer(prod)
	defer srv.Close()
	v, err := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: func() time.Time { return epoch }})
	require.NoError(t, err)
	rc, err := webhook.NewRangeClient(srv.URL, apiKey, v, &webhook.RangeClientOptions{HTTPClient: srv.Client()})
	require.NoError(t, err)
	var processed atomic.Uint64
	next := uint64(1)
	process := func(_ context.Context, s webhook.Step) error {
		if s.Event.Sequence != next {
			return fmt.Errorf("event %d processed out of order, %d expected", s.Event.Sequence, next)
		}
		next++
		processed.Add(1)
		return nil
	}
	tr, err := webhook.NewTracker(&webhook.MemoryCursorStore{}, rc, process, nil)
	require.NoError(t, err)
	receiver, err := webhook.NewReceiver("we_big", v, tr, nil)
	require.NoError(t, err)

	last := prod.event(gap + 1)
	body := []byte(fmt.Sprintf(`{"id":%q,"endpoint":"we_big","sequence":%d,"type":"order.created","created":%d,"api_version":"v1","data":%s}`,
		last.ID, last.Sequence, last.Created, last.Data))
	sig, err := webhook.Sign(body, epoch, secret)
	require.NoError(t, err)

	stop := heapPeak(t)
	res, err := receiver.Receive(context.Background(), sig, strconv.Itoa(gap+1), body)
	peak := stop()
	require.NoError(t, err)
	require.Equal(t, webhook.Processed, res.Outcome)
	require.Equal(t, gap, res.Recovered)
	require.Equal(t, uint64(gap+1), processed.Load())
	require.Equal(t, int64(gap/webhook.DefaultPageSize), prod.pages.Load(), "one request per page")
	t.Logf("peak heap above baseline over a %d-event gap of 1 KiB events: %.1f MiB", gap, float64(peak)/(1<<20))
	require.Less(t, peak, uint64(32<<20), "the consumer's peak heap")
}

// hugeBody answers with size bytes generated on the fly, so neither side holds them.
type hugeBody struct {
	size    int64
	written atomic.Int64
}

func (h *hugeBody) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(webhook.HeaderSignature, "t=1,v1="+strings.Repeat("0", 64))
	w.Header().Set("Content-Type", "application/json")
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	_, _ = w.Write([]byte(`{"object":"list","data":[],"pad":"`))
	for h.written.Load() < h.size {
		n, err := w.Write(chunk)
		h.written.Add(int64(n))
		if err != nil {
			return
		}
	}
}

// A producer that answers a range request with 100 MiB is refused at the budget, without the body
// being read, let alone held.
func TestRangeClientRefusesAHugeBody(t *testing.T) {
	secret := webhook.NewSecret()
	h := &hugeBody{size: 100 << 20}
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := newRangeClient(t, srv.URL, secret, &webhook.RangeClientOptions{HTTPClient: srv.Client()})
	stop := heapPeak(t)
	_, err := c.FetchRange(context.Background(), "we_a", 1, 10)
	peak := stop()
	require.ErrorIs(t, err, webhook.ErrRangeTooLarge)
	require.ErrorIs(t, err, webhook.ErrRangeResponse)
	require.Less(t, peak, uint64(32<<20), "read no further than the %d-byte budget", webhook.DefaultMaxResponseBytes)
	require.Less(t, h.written.Load(), int64(50<<20), "the producer could not push its 100 MiB")
}

// Pages that are each within the response cap but together exceed the fetch budget fail the fetch;
// the Tracker then asks for fewer events at a time and gets through the gap.
func TestTrackerNarrowsItsFetchesToTheBudget(t *testing.T) {
	secret := webhook.NewSecret()
	prod := &lazyProducer{secret: secret, stream: "we_a", last: 60, dataSize: 20 << 10}
	srv := httptest.NewServer(prod)
	defer srv.Close()
	c := newRangeClient(t, srv.URL, secret, &webhook.RangeClientOptions{HTTPClient: srv.Client(), PageSize: 10,
		MaxResponseBytes: 256 << 10, MaxFetchBytes: 128 << 10})
	_, err := c.FetchRange(context.Background(), "we_a", 1, 60)
	require.ErrorIs(t, err, webhook.ErrRangeTooLarge, "60 events of 20 KiB do not fit 128 KiB")

	rec := &recorder{}
	tr, err := webhook.NewTracker(&webhook.MemoryCursorStore{}, c, rec.process, nil)
	require.NoError(t, err)
	n, err := tr.CatchUp(context.Background(), "we_a")
	require.NoError(t, err)
	require.Equal(t, 60, n)
	require.Equal(t, seqRange(1, 60), rec.processed())
}

// A range page carrying an event signed for another endpoint is refused.
func TestRangeClientRefusesEventsOfAnotherEndpoint(t *testing.T) {
	secret := webhook.NewSecret()
	prod := &lazyProducer{secret: secret, stream: "we_a", last: 5, dataSize: 64,
		endpoint: func(seq uint64) string {
			if seq == 3 {
				return "we_b"
			}
			return "we_a"
		}}
	srv := httptest.NewServer(prod)
	defer srv.Close()
	c := newRangeClient(t, srv.URL, secret, &webhook.RangeClientOptions{HTTPClient: srv.Client()})
	_, err := c.FetchRange(context.Background(), "we_a", 1, 5)
	require.ErrorIs(t, err, webhook.ErrRangeResponse)
	require.Contains(t, err.Error(), "event 3 is signed for another endpoint")
}
