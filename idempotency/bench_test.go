package idempotency_test

import (
	"bytes"
	"crypto/sha256"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/memstore"
	"github.com/svcplatform/conventions/seal"
)

// The benchmarks compare a bare handler with the same handler behind the middleware, on the paths a
// request takes: first execution (claim, run, capture, complete) and replay (claim finds the record,
// write it). Each request carries a fresh key (first execution) or the same key (replay); both the
// bare and the wrapped runs build their requests the same way, so the difference is the middleware.

// benchWriter is a reusable ResponseWriter that discards the body, so that the benchmark measures
// the middleware rather than httptest's recorder.
type benchWriter struct {
	h    http.Header
	code int
	n    int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) WriteHeader(code int)        { w.code = code }
func (w *benchWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
func (w *benchWriter) reset()                      { clear(w.h); w.code, w.n = 0, 0 }

// benchBody is a resettable request body.
type benchBody struct{ bytes.Reader }

func (*benchBody) Close() error { return nil }

// benchHandler reads the request and answers 201 with a body of the request's size (256 B or 64 KiB).
func benchHandler(resp []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(resp)
	})
}

type benchReq struct {
	r    *http.Request
	body *benchBody
	data []byte
	key  []byte
	w    *benchWriter
}

func newBenchReq(size int) *benchReq {
	data := bytes.Repeat([]byte("x"), size)
	br := &benchReq{body: &benchBody{}, data: data, w: &benchWriter{h: http.Header{}}}
	br.r = &http.Request{
		Method: "POST", URL: &url.URL{Path: "/v1/orders"}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Authorization": {authA}, idempotency.HeaderKey: {"bench"}, "Content-Type": {"application/json"}},
		Body:          br.body,
		ContentLength: int64(size),
	}
	return br
}

// next prepares the request for another round: a fresh key when fresh, the same one otherwise.
func (br *benchReq) next(i int64, fresh bool) {
	if fresh {
		br.key = strconv.AppendInt(append(br.key[:0], "key-"...), i, 10)
		br.r.Header[idempotency.HeaderKey][0] = string(br.key)
	}
	br.body.Reset(br.data)
	br.w.reset()
}

// benchClock advances a microsecond per reading, so that records with a short retention expire and
// the memory store stays at a steady size however long the benchmark runs.
func benchClock() func() time.Time {
	base := time.Now()
	var n atomic.Int64
	return func() time.Time { return base.Add(time.Duration(n.Add(1)) * time.Microsecond) }
}

func BenchmarkMiddleware(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"256B", 256}, {"64KiB", 64 << 10}} {
		resp := bytes.Repeat([]byte("y"), size.n)
		bare := benchHandler(resp)
		// First executions keep records for 20 ms of the benchmark clock (two readings per request:
		// about 10,000 records), so the store stays at a steady size; the replayed record is kept for
		// the default day.
		// Every request carries one credential: its quota is raised above the ~10,000 records so that
		// the benchmark measures the quota's bookkeeping, not its refusals.
		newMW := func(retention time.Duration, sealer *seal.Ring) func() http.Handler {
			return func() http.Handler {
				store := memstore.New(&memstore.Options{MaxRecordsPerScope: 50_000})
				// The lease must be shorter than the retention; a first execution ends within both.
				return must(idempotency.New(&idempotency.Options{Store: store, Now: benchClock(), Retention: retention,
					Lease: min(idempotency.DefaultLease, retention/2), Sealer: sealer})).Handler(bare)
			}
		}
		key, err := seal.GenerateKey(1)
		if err != nil {
			b.Fatal(err)
		}
		sealer, err := seal.NewRing(key)
		if err != nil {
			b.Fatal(err)
		}
		cases := []struct {
			name  string
			h     func() http.Handler
			fresh bool
		}{
			{"Bare", func() http.Handler { return bare }, true},
			{"FirstExecution", newMW(20*time.Millisecond, nil), true},
			{"Replay", newMW(0, nil), false},
			{"FirstExecutionSealed", newMW(20*time.Millisecond, sealer), true},
			{"ReplaySealed", newMW(0, sealer), false},
		}
		for _, tc := range cases {
			b.Run(tc.name+"/"+size.name, func(b *testing.B) {
				h := tc.h()
				br := newBenchReq(size.n)
				var seq int64
				if !tc.fresh { // complete the record once
					br.next(0, false)
					h.ServeHTTP(br.w, br.r)
				}
				b.SetBytes(int64(size.n))
				b.ReportAllocs()
				cpu := startCPU()
				for b.Loop() {
					seq++
					br.next(seq, tc.fresh)
					h.ServeHTTP(br.w, br.r)
					if br.w.code != http.StatusCreated || br.w.n != size.n {
						b.Fatalf("status %d, %d bytes", br.w.code, br.w.n)
					}
				}
				cpu.report(b)
			})
			b.Run(tc.name+"Parallel/"+size.name, func(b *testing.B) {
				h := tc.h()
				var seq atomic.Int64
				if !tc.fresh {
					br := newBenchReq(size.n)
					br.next(0, false)
					h.ServeHTTP(br.w, br.r)
				}
				b.SetBytes(int64(size.n))
				b.ReportAllocs()
				cpu := startCPU()
				defer cpu.report(b)
				b.RunParallel(func(pb *testing.PB) {
					br := newBenchReq(size.n)
					for pb.Next() {
						br.next(seq.Add(1), tc.fresh)
						h.ServeHTTP(br.w, br.r)
						if br.w.code != http.StatusCreated {
							b.Errorf("status %d", br.w.code)
							return
						}
					}
				})
			})
		}
	}
}

func BenchmarkFingerprint(b *testing.B) {
	sum := [32]byte{1}
	b.Run("NoQuery", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = idempotency.NewFingerprint("POST", "/v1/orders", "", sum)
		}
	})
	b.Run("Query", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = idempotency.NewFingerprint("POST", "/v1/orders", "b=2&a=1&c=x%20y", sum)
		}
	})
}

func BenchmarkValidKey(b *testing.B) {
	k := idempotency.NewKey()
	b.ReportAllocs()
	for b.Loop() {
		if !idempotency.ValidKey(k) {
			b.Fatal("invalid")
		}
	}
}

// cpuMeter reports the process's CPU time per operation next to the wall time: on a busy machine
// the wall time swings with the neighbours' load, the CPU time much less.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

func startCPU() cpuMeter {
	t, ok := processCPU()
	return cpuMeter{t, ok}
}

func (c cpuMeter) report(b *testing.B) {
	if t, ok := processCPU(); ok && c.ok && b.N > 0 {
		b.ReportMetric(float64(t-c.start)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkBodyFingerprint compares the default fingerprint (SHA-256 of the body's bytes) with
// CanonicalJSONFingerprint on a small order and on a 64 KiB list of them.
func BenchmarkBodyFingerprint(b *testing.B) {
	small := []byte(`{"account":"acc_1","side":"buy","items":[{"sku":"sku_1","qty":2,"price":12.50},{"sku":"sku_2","qty":1,"price":3}],"note":"leave at the door \u00e9"}`)
	var big bytes.Buffer
	big.WriteString(`{"orders":[`)
	for i := 0; big.Len() < 64<<10; i++ {
		if i > 0 {
			big.WriteByte(',')
		}
		big.Write(small)
	}
	big.WriteString(`]}`)
	r := &http.Request{Method: "POST", URL: &url.URL{Path: "/v1/orders", RawQuery: "expand=items"}}
	for _, body := range []struct {
		name string
		b    []byte
	}{{"small", small}, {"64KiB", big.Bytes()}} {
		b.Run(body.name+"/bytes", func(b *testing.B) {
			b.SetBytes(int64(len(body.b)))
			b.ReportAllocs()
			for b.Loop() {
				_ = idempotency.NewFingerprint(r.Method, r.URL.EscapedPath(), r.URL.RawQuery, sha256.Sum256(body.b))
			}
		})
		b.Run(body.name+"/canonical-json", func(b *testing.B) {
			b.SetBytes(int64(len(body.b)))
			b.ReportAllocs()
			for b.Loop() {
				_, _ = idempotency.CanonicalJSONFingerprint(r, body.b)
			}
		})
	}
}
