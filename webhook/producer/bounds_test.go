package producer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// bigData returns JSON data of exactly n bytes: a string member padded with 'x'.
func bigData(n int) json.RawMessage {
	const frame = `{"pad":""}`
	return json.RawMessage(`{"pad":"` + strings.Repeat("x", n-len(frame)) + `"}`)
}

// TestPublisherRefusesEventsOverTheMaximum: an event whose envelope would exceed MaxEventBytes is
// refused on every publishing path, and nothing is appended.
func TestPublisherRefusesEventsOverTheMaximum(t *testing.T) {
	ctx := context.Background()
	eps := mustEndpoints(t,
		producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}},
		producer.Endpoint{ID: "we_b", URL: "https://b.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	for _, lc := range []struct {
		name string
		log  func() driver.Log
	}{
		{"MemoryLog", func() driver.Log { return memstore.NewLog() }},
		{"Append only", func() driver.Log { return appendOnly{memstore.NewLog()} }},
	} {
		t.Run(lc.name, func(t *testing.T) {
			l := lc.log()
			pub := mustPublisher(t, l, eps, nil)
			big := bigData(producer.DefaultMaxEventBytes) // the envelope around it is over the maximum
			paths := map[string]func(data any) error{
				"Publish": func(data any) error { _, err := pub.Publish(ctx, "we_a", "order.created", data); return err },
				"PublishTo": func(data any) error {
					_, err := pub.PublishTo(ctx, producer.Endpoint{ID: "we_a"}, "order.created", data)
					return err
				},
				"PublishToEach": func(data any) error {
					_, err := pub.PublishToEach(ctx, []producer.Endpoint{{ID: "we_a"}, {ID: "we_b"}}, "order.created", data)
					return err
				},
				"PublishToOwner": func(data any) error {
					_, err := pub.PublishToOwner(ctx, "lic_1", "order.created", data)
					return err
				},
			}
			for name, publish := range paths {
				err := publish(big)
				require.ErrorIs(t, err, producer.ErrEventTooLarge, name)
				require.Contains(t, err.Error(), fmt.Sprint(producer.DefaultMaxEventBytes), "%s: the error names the maximum", name)
			}
			for _, stream := range []string{"we_a", "we_b"} {
				evs, _, err := l.Range(ctx, stream, 1, math.MaxUint64, 10)
				require.NoError(t, err)
				require.Empty(t, evs, "a refused event is not appended")
			}
			// Just under the maximum, envelope included, goes through.
			for name, publish := range paths {
				require.NoError(t, publish(bigData(producer.DefaultMaxEventBytes-1024)), name)
			}
		})
	}
	t.Run("configurable", func(t *testing.T) {
		pub := mustPublisher(t, memstore.NewLog(), eps, &producer.PublisherOptions{MaxEventBytes: 1024})
		_, err := pub.Publish(ctx, "we_a", "order.created", bigData(1024))
		require.ErrorIs(t, err, producer.ErrEventTooLarge)
		_, err = pub.Publish(ctx, "we_a", "order.created", bigData(512))
		require.NoError(t, err)
		// A type that JSON escapes counts at its escaped size.
		_, err = pub.Publish(ctx, "we_a", strings.Repeat("<", 160), bigData(512))
		require.ErrorIs(t, err, producer.ErrEventTooLarge)
		_, err = producer.NewPublisher(memstore.NewLog(), eps, &producer.PublisherOptions{MaxEventBytes: -1})
		require.Error(t, err)
	})
}

// publishBig appends n events of size bytes of data each to stream, bypassing the Publisher's
// maximum (events stored before it existed, or by another producer).
func publishBig(t testing.TB, l driver.Log, stream string, n, size int) {
	t.Helper()
	data := bigData(size)
	for range n {
		_, err := l.Append(context.Background(), driver.StreamEvent{Stream: stream, Event: webhook.Event{Type: "order.created", Created: t0.Unix(),
			APIVersion: "v1", Data: data}})
		require.NoError(t, err)
	}
}

// countingLog records the data bytes each read of the log returned.
type countingLog struct {
	driver.Log
	mu       sync.Mutex
	maxBytes int // the most data bytes one read returned
}

func (c *countingLog) note(evs []webhook.Event) {
	n := 0
	for _, e := range evs {
		n += len(e.Data)
	}
	c.mu.Lock()
	c.maxBytes = max(c.maxBytes, n)
	c.mu.Unlock()
}

func (c *countingLog) Range(ctx context.Context, stream string, from, to uint64, limit int) ([]webhook.Event, bool, error) {
	evs, more, err := c.Log.Range(ctx, stream, from, to, limit)
	c.note(evs)
	return evs, more, err
}

// countingBytes is a countingLog that is a ByteRanger too.
type countingBytes struct{ *countingLog }

func (c countingBytes) RangeBytes(ctx context.Context, stream string, from, to uint64, limit, maxBytes int) ([]webhook.Event, bool, error) {
	evs, more, err := c.Log.(driver.ByteRanger).RangeBytes(ctx, stream, from, to, limit, maxBytes)
	c.note(evs)
	return evs, more, err
}

// TestRangePageByteBudget: a page ends before it passes the byte budget (has_more), holds at least
// one event whatever its size, and the handler never reads more than about the budget from the log.
func TestRangePageByteBudget(t *testing.T) {
	const size = 64 << 10
	eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1",
		Secrets: []string{webhook.NewSecret()}})
	mem := memstore.NewLog()
	publishBig(t, mem, "we_a", 200, size)
	publishBig(t, mem, "we_a", 1, 5<<20) // one event larger than the whole budget
	publishBig(t, mem, "we_a", 3, size)
	for _, lc := range []struct {
		name    string
		log     *countingLog
		maxRead int // the most data one read of the log may return
	}{
		// At most the budget, or the one event over it.
		{"ByteRanger", &countingLog{Log: mem}, 5<<20 + 128},
		// RangeChunk events at a time, the large one among them.
		{"plain Log", &countingLog{Log: plainLog{mem}}, (producer.RangeChunk-1)*size + 5<<20 + 128},
	} {
		t.Run(lc.name, func(t *testing.T) {
			var l driver.Log = lc.log
			if _, ok := lc.log.Log.(driver.ByteRanger); ok {
				l = countingBytes{lc.log}
			}
			h := must(producer.NewRangeHandler(l, eps, testLicensee, nil))
			mux := http.NewServeMux()
			mux.Handle(producer.RangePattern("v1"), h)
			get := func(from uint64) (webhook.EventList, int) {
				r := httptest.NewRequest(http.MethodGet, fmt.Sprintf("/v1/webhook_endpoints/we_a/events?from=%d&limit=1000", from), nil)
				r.Header.Set(licenseeHeader, "lic_1")
				w := httptest.NewRecorder()
				apierror.WithRequestID(mux).ServeHTTP(w, r)
				return decodeList(t, w), w.Body.Len()
			}
			var seqs []uint64
			pages := 0
			for from := uint64(1); ; pages++ {
				page, n := get(from)
				require.NotEmpty(t, page.Data, "a page has at least one event")
				if len(page.Data) > 1 {
					require.LessOrEqual(t, n, webhook.DefaultMaxResponseBytes, "page from %d", from)
				}
				seqs = append(seqs, listSeqs(page)...)
				from = page.Data[len(page.Data)-1].Sequence + 1
				if !page.HasMore {
					break
				}
			}
			require.Equal(t, spanSeqs(1, 204), seqs, "every event once, in order")
			require.GreaterOrEqual(t, pages, 4)
			require.LessOrEqual(t, lc.log.maxBytes, lc.maxRead)

			page, _ := get(201)
			require.Equal(t, []uint64{201}, listSeqs(page), "the event over the budget comes alone")
			require.True(t, page.HasMore)
		})
	}
}

// plainLog hides every optional interface of a log, leaving only driver.Log.
type plainLog struct{ driver.Log }

// gatedWriter holds every handler's Write until all of them have reached it, so that a test can
// measure the memory of that many pages held at once.
type gatedWriter struct {
	*httptest.ResponseRecorder
	arrived *sync.WaitGroup
	release chan struct{}
	wrote   atomic.Int64
}

func (g *gatedWriter) Write(b []byte) (int, error) {
	g.arrived.Done()
	<-g.release
	g.wrote.Add(int64(len(b)))
	return len(b), nil // the body is not kept: only what the handler holds counts
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestRangeConcurrentMaximalPagesStayBounded: 16 licensees ask for maximal pages (limit=1000 of
// 64 KiB events) at once; while all 16 are being written, the live heap has grown by no more than
// 16 × (2 × DefaultMaxPageBytes + DefaultMaxEventBytes), the documented bound. Before the byte budget each page
// was about 128 MiB (the events read and the 62 MiB body).
func TestRangeConcurrentMaximalPagesStayBounded(t *testing.T) {
	const (
		pages = 16
		size  = 64 << 10
	)
	mem := memstore.NewLog()
	publishBig(t, mem, "we_shared", 1000, size)
	var list []producer.Endpoint
	for i := range pages {
		list = append(list, producer.Endpoint{ID: fmt.Sprintf("we_%d", i), URL: "https://a.example/",
			Owner: fmt.Sprintf("lic_%d", i), Secrets: []string{webhook.NewSecret()}})
	}
	eps := mustEndpoints(t, list...)
	h := must(producer.NewRangeHandler(sharedStream{mem}, eps, testLicensee, nil))
	mux := http.NewServeMux()
	mux.Handle(producer.RangePattern("v1"), h)

	var arrived sync.WaitGroup
	arrived.Add(pages)
	release := make(chan struct{})
	writers := make([]*gatedWriter, pages)
	before := liveHeap()
	var done sync.WaitGroup
	for i := range pages {
		writers[i] = &gatedWriter{ResponseRecorder: httptest.NewRecorder(), arrived: &arrived, release: release}
		done.Go(func() {
			r := httptest.NewRequest(http.MethodGet, fmt.Sprintf("/v1/webhook_endpoints/we_%d/events?from=1&limit=1000", i), nil)
			r.Header.Set(licenseeHeader, fmt.Sprintf("lic_%d", i))
			mux.ServeHTTP(writers[i], r)
		})
	}
	arrived.Wait()
	during := liveHeap()
	close(release)
	done.Wait()
	growth := int64(during) - int64(before)
	var body int64
	for _, w := range writers {
		require.Equal(t, http.StatusOK, w.Code)
		body = max(body, w.wrote.Load())
	}
	t.Logf("16 concurrent maximal pages: live heap grew by %.1f MiB; largest page %.2f MiB",
		float64(growth)/(1<<20), float64(body)/(1<<20))
	bound := int64(pages) * (2*producer.DefaultMaxPageBytes + producer.DefaultMaxEventBytes) // per request: the events read, the body, one rendered event
	require.LessOrEqual(t, growth, bound, "16 concurrent pages hold at most the documented bound")
	require.LessOrEqual(t, body, int64(webhook.DefaultMaxResponseBytes))
}

// sharedStream serves every endpoint's range from one stream, so that 16 licensees read maximal pages
// without 16 copies of the events in the heap.
type sharedStream struct{ *memstore.Log }

func (s sharedStream) Range(ctx context.Context, _ string, from, to uint64, limit int) ([]webhook.Event, bool, error) {
	return s.Log.Range(ctx, "we_shared", from, to, limit)
}

func (s sharedStream) RangeBytes(ctx context.Context, _ string, from, to uint64, limit, maxBytes int) ([]webhook.Event, bool, error) {
	return s.Log.RangeBytes(ctx, "we_shared", from, to, limit, maxBytes)
}

// blockingLog holds every range read of stream we_a until release is closed, telling arrived.
type blockingLog struct {
	*memstore.Log
	arrived chan struct{}
	release chan struct{}
}

func (b blockingLog) RangeBytes(ctx context.Context, stream string, from, to uint64, limit, maxBytes int) ([]webhook.Event, bool, error) {
	if stream == "we_a" {
		b.arrived <- struct{}{}
		<-b.release
	}
	return b.Log.RangeBytes(ctx, stream, from, to, limit, maxBytes)
}

// TestRangeInFlightPerLicensee: a licensee has at most MaxInFlight range requests served at once; one
// more is 429 with Retry-After, while another licensee is served, and a slot frees when a request ends.
func TestRangeInFlightPerLicensee(t *testing.T) {
	eps := mustEndpoints(t,
		producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}},
		producer.Endpoint{ID: "we_b", URL: "https://b.example/", Owner: "lic_2", Secrets: []string{webhook.NewSecret()}})
	mem := memstore.NewLog()
	publishN(t, mem, "we_a", 3, t0)
	publishN(t, mem, "we_b", 3, t0)
	bl := blockingLog{Log: mem, arrived: make(chan struct{}), release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.Handle(producer.RangePattern("v1"), must(producer.NewRangeHandler(bl, eps, testLicensee, nil)))
	get := func(licensee, id string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/v1/webhook_endpoints/"+id+"/events?from=1", nil)
		r.Header.Set(licenseeHeader, licensee)
		w := httptest.NewRecorder()
		apierror.WithRequestID(mux).ServeHTTP(w, r)
		return w
	}
	var wg sync.WaitGroup
	codes := make(chan int, producer.DefaultRangeInFlight)
	for range producer.DefaultRangeInFlight {
		wg.Go(func() { codes <- get("lic_1", "we_a").Code })
		<-bl.arrived
	}
	w := get("lic_1", "we_a")
	require.Equal(t, http.StatusTooManyRequests, w.Code, w.Body.String())
	require.Equal(t, "1", w.Header().Get("Retry-After"))
	require.NoError(t, apierror.Check(w.Code, w.Header(), w.Body.Bytes()))
	require.Contains(t, w.Body.String(), producer.CodeRangeBusy)
	require.Equal(t, http.StatusOK, get("lic_2", "we_b").Code, "another licensee is served meanwhile")

	close(bl.release)
	wg.Wait()
	close(codes)
	for c := range codes {
		require.Equal(t, http.StatusOK, c)
	}
	go func() { <-bl.arrived }()
	require.Equal(t, http.StatusOK, get("lic_1", "we_a").Code, "the slots are free again")
}
