package requestlog_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/requestlog"
)

// nopWriter is a ResponseWriter that keeps nothing, so that the benchmarks measure the middleware.
type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *nopWriter) WriteHeader(int)             {}

// nopStore keeps nothing: with it, a benchmark measures the middleware and the queue alone.
type nopStore struct{ requestlog.Store }

func (nopStore) Insert(context.Context, []requestlog.Entry) error { return nil }

func (nopStore) DeleteBefore(context.Context, time.Time, int) (int, error) { return 0, nil }

// BenchmarkHandler is the log's cost per request: the same handler behind apierror.WithRequestID,
// without the log, with it (memory store), and with a store that keeps nothing, on one goroutine and
// on all of them. The difference is the middleware's overhead; the flusher's writes run on their own
// goroutine, whose allocations the benchmark counts too.
func BenchmarkHandler(b *testing.B) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"ord_1"}`))
	})
	for _, tc := range []struct {
		name   string
		logged bool
		store  requestlog.Store // nil: the memory store
	}{{"bare", false, nil}, {"logged", true, nil}, {"logged_nopstore", true, nopStore{}}} {
		build := func(b *testing.B) (http.Handler, *requestlog.Log) {
			if !tc.logged {
				return apierror.WithRequestID(ok), nil
			}
			l := must(requestlog.New(&requestlog.Options{Store: tc.store, BufferSize: 1 << 16, FlushInterval: 10 * time.Millisecond}))
			b.Cleanup(func() { _ = l.Close(context.Background()) })
			return apierror.WithRequestID(l.Handler(ok)), l
		}
		report := func(b *testing.B, l *requestlog.Log) {
			if l != nil {
				_ = l.Flush(context.Background())
				st := l.Stats()
				b.ReportMetric(float64(st.Dropped)/float64(b.N), "dropped/op")
			}
		}
		b.Run(tc.name, func(b *testing.B) {
			h, l := build(b)
			r := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
			w := &nopWriter{h: make(http.Header)}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				h.ServeHTTP(w, r)
			}
			report(b, l)
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			h, l := build(b)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				r := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
				w := &nopWriter{h: make(http.Header)}
				for pb.Next() {
					clear(w.h)
					h.ServeHTTP(w, r)
				}
			})
			report(b, l)
		})
	}
}

// BenchmarkMemoryStoreInsert writes the Log's default batch into the memory store.
func BenchmarkMemoryStoreInsert(b *testing.B) {
	s := must(requestlog.NewMemoryStore(nil))
	batch := make([]requestlog.Entry, requestlog.DefaultBatchSize)
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		for i := range batch {
			n++
			batch[i] = requestlog.Entry{RequestID: "req_" + time.Duration(n).String(), Owner: "live:lic_a", Method: "POST",
				Route: "POST /v1/orders", Status: 201, At: t0.Add(time.Duration(n) * time.Microsecond)}
		}
		if err := s.Insert(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
}
