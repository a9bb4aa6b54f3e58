package benchmarks

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"
	fiberidem "github.com/gofiber/fiber/v3/middleware/idempotency"
	"github.com/valyala/fasthttp"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/memstore"
)

// The idempotency benchmarks send the same POST, with the same key, headers and body, to four
// in-process servers: ours around a net/http handler, that handler bare, Fiber's idempotency
// middleware around a Fiber handler, and that handler bare. Neither framework touches the network:
// net/http is driven through ServeHTTP on a reused request, Fiber through app.Handler() on a reused
// fasthttp.RequestCtx, which is what each framework's server does per request after parsing. Each
// middleware is judged by its ratio over its own bare handler.

var idemSizes = []struct {
	name string
	n    int
}{
	{"256B", 256},
	{"64KiB", 64 << 10},
}

const (
	idemPath = "/v1/orders"
	// idemAuth is the credential; ours scopes keys by it (its default Scope), Fiber ignores it.
	idemAuth = "Bearer sk_sandbox_bench0000000000000000000000"
	// idemReplayKey is the one key of the replay benchmarks, shaped like a UUID because Fiber's
	// default key validation demands 36 characters.
	idemReplayKey = "6f1c2a9e-3b4d-4e5f-8a7b-0c1d2e3f4a5b"
)

// idemKey writes the i-th distinct first-execution key into buf, UUID-shaped like idemReplayKey.
func idemKey(buf *[36]byte, i uint64) []byte {
	copy(buf[:], "00000000-0000-4000-8000-000000000000")
	for j := len(buf) - 1; i > 0 && j >= 24; j-- {
		buf[j] = byte('0' + i%10)
		i /= 10
	}
	return buf[:]
}

// idemPayload is a JSON document of exactly n bytes, used as both the request and the response body.
func idemPayload(n int, field string) []byte {
	head := `{"` + field + `":"`
	b := make([]byte, 0, n)
	b = append(b, head...)
	for len(b) < n-2 {
		b = append(b, 'a'+byte(len(b)%26))
	}
	return append(b, `"}`...)
}

// --- net/http ------------------------------------------------------------------------------------

// orderHandler is the application handler: it consumes the request body and answers 201 with resp.
// runs, when not nil, counts executions (the tests use it; the benchmarks pass nil).
func orderHandler(resp []byte, runs *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs != nil {
			runs.Add(1)
		}
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/v1/orders/ord_1")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(resp)
	})
}

// reqBody is a request body that can be rewound without allocating.
type reqBody struct{ bytes.Reader }

func (*reqBody) Close() error { return nil }

// httpClient is one goroutine's request and response, reused for every operation: only the key and
// the body's read position change, as they would between two requests on a kept-alive connection.
type httpClient struct {
	tmpl   http.Request
	header http.Header
	body   *reqBody
	data   []byte
	w      *discardWriter
	key    [36]byte
}

func newHTTPClient(data []byte) *httpClient {
	c := &httpClient{tmpl: *httptest.NewRequest(http.MethodPost, idemPath, nil), data: data, w: newDiscardWriter(), body: &reqBody{}}
	c.header = http.Header{
		"Authorization":       {idemAuth},
		"Content-Type":        {"application/json"},
		idempotency.HeaderKey: {idemReplayKey},
	}
	c.tmpl.Header = c.header
	c.tmpl.ContentLength = int64(len(data))
	return c
}

// do sends one request with key (nil: the replay key) and returns the response status.
func (c *httpClient) do(h http.Handler, key []byte) int {
	if key != nil {
		c.header[idempotency.HeaderKey][0] = string(key)
	}
	c.body.Reset(c.data)
	r := c.tmpl
	r.Body = c.body
	c.w.reset()
	h.ServeHTTP(c.w, &r)
	return c.w.status
}

// firstClock is ours' clock in the first-execution benchmarks: it advances a millisecond per reading,
// and with firstRetention records expire about as fast as they are made, so the bounded memory store
// reaches a steady state (as a real one does over a day) instead of filling up during the run.
type firstClock struct {
	base time.Time
	n    atomic.Int64
}

func (c *firstClock) now() time.Time { return c.base.Add(time.Duration(c.n.Add(1)) * time.Millisecond) }

const firstRetention = time.Second

func newOurs(first bool, next http.Handler) http.Handler {
	opts := &idempotency.Options{Store: memstore.New(nil)}
	if first {
		clock := &firstClock{base: time.Now()}
		opts.Now, opts.Retention, opts.Lease = clock.now, firstRetention, firstRetention/2
	}
	return must(idempotency.New(opts)).Handler(next)
}

// newOursScoped is newOurs with the scope taken from an authenticated principal, which the benchmark
// stands in for with a constant: what remains is the middleware's own work.
func newOursScoped(first bool, next http.Handler) http.Handler {
	opts := &idempotency.Options{Store: memstore.New(nil),
		Scope: func(*http.Request) (string, error) { return "lic_bench", nil }}
	if first {
		clock := &firstClock{base: time.Now()}
		opts.Now, opts.Retention, opts.Lease = clock.now, firstRetention, firstRetention/2
	}
	return must(idempotency.New(opts)).Handler(next)
}

// --- Fiber ---------------------------------------------------------------------------------------

func fiberOrderHandler(resp []byte, runs *atomic.Int64) fiber.Handler {
	return func(c fiber.Ctx) error {
		if runs != nil {
			runs.Add(1)
		}
		_ = c.Body()
		c.Set("Content-Type", "application/json")
		c.Set("Location", "/v1/orders/ord_1")
		return c.Status(http.StatusCreated).Send(resp)
	}
}

// newFiber returns the fasthttp handler of a Fiber app serving POST /v1/orders, with Fiber's
// idempotency middleware (its defaults, the key header named as ours) when withMiddleware is set.
// In the first-execution runs its records live one second (Lifetime's unit), so that its default
// memory storage's collector frees them; that storage has a goroutine of its own which Fiber gives
// no way to stop.
func newFiber(withMiddleware, first bool, handler fiber.Handler) fasthttp.RequestHandler {
	app := fiber.New()
	if withMiddleware {
		cfg := fiberidem.Config{KeyHeader: idempotency.HeaderKey}
		if first {
			cfg.Lifetime = time.Second
		}
		app.Use(fiberidem.New(cfg))
	}
	app.Post(idemPath, handler)
	return app.Handler()
}

// fiberClient is one goroutine's fasthttp request context, reused like httpClient.
type fiberClient struct {
	ctx fasthttp.RequestCtx
	key [36]byte
}

func newFiberClient(data []byte) *fiberClient {
	c := &fiberClient{}
	req := &c.ctx.Request
	req.Header.SetMethod(http.MethodPost)
	req.SetRequestURI(idemPath)
	req.Header.SetContentType("application/json")
	req.Header.Set("Authorization", idemAuth)
	req.Header.Set(idempotency.HeaderKey, idemReplayKey)
	req.SetBody(data)
	return c
}

func (c *fiberClient) do(h fasthttp.RequestHandler, key []byte) int {
	if key != nil {
		c.ctx.Request.Header.SetBytesV(idempotency.HeaderKey, key)
	}
	c.ctx.Response.Reset()
	h(&c.ctx)
	return c.ctx.Response.StatusCode()
}

// --- the benchmarks ------------------------------------------------------------------------------

// server builds one of the four servers for a benchmark and returns a constructor of per-goroutine
// senders. A sender sends one request, with a fresh key when first is set, and returns the status.
// runs, when not nil, counts the handler's executions.
type server func(first bool, data, resp []byte, runs *atomic.Int64) func() func() int

var idemServers = []struct {
	name string
	new  server
}{
	{"ours", func(first bool, data, resp []byte, runs *atomic.Int64) func() func() int {
		return httpServer(newOurs(first, orderHandler(resp, runs)), first, data)
	}},
	{"ours-principal", func(first bool, data, resp []byte, runs *atomic.Int64) func() func() int {
		// Ours as a service wires it behind its authenticator: the scope is the authenticated
		// principal (apikey.RequestScope, say) instead of the default hash of the Authorization header.
		return httpServer(newOursScoped(first, orderHandler(resp, runs)), first, data)
	}},
	{"nethttp", func(first bool, data, resp []byte, runs *atomic.Int64) func() func() int {
		return httpServer(orderHandler(resp, runs), first, data)
	}},
	{"fiber", func(first bool, data, resp []byte, runs *atomic.Int64) func() func() int {
		return fiberServer(newFiber(true, first, fiberOrderHandler(resp, runs)), first, data)
	}},
	{"fiberbare", func(first bool, data, resp []byte, runs *atomic.Int64) func() func() int {
		return fiberServer(newFiber(false, first, fiberOrderHandler(resp, runs)), first, data)
	}},
}

// httpServer and fiberServer number first-execution keys with one counter per server, shared by its
// goroutines, so that no key repeats on a server.
func httpServer(h http.Handler, first bool, data []byte) func() func() int {
	seq := new(atomic.Uint64)
	return func() func() int {
		c := newHTTPClient(data)
		if !first {
			return func() int { return c.do(h, nil) }
		}
		return func() int { return c.do(h, idemKey(&c.key, seq.Add(1))) }
	}
}

func fiberServer(h fasthttp.RequestHandler, first bool, data []byte) func() func() int {
	seq := new(atomic.Uint64)
	return func() func() int {
		c := newFiberClient(data)
		if !first {
			return func() int { return c.do(h, nil) }
		}
		return func() int { return c.do(h, idemKey(&c.key, seq.Add(1))) }
	}
}

// BenchmarkIdempotency measures a first execution (a new key: claim, handler, store) and a replay
// (a completed key: the stored response, no handler), with 256 B and 64 KiB bodies, on one goroutine
// and in parallel, for ours, net/http bare, Fiber's middleware and Fiber bare.
func BenchmarkIdempotency(b *testing.B) {
	for _, phase := range []struct {
		name  string
		first bool
	}{{"first", true}, {"replay", false}} {
		for _, size := range idemSizes {
			data, resp := idemPayload(size.n, "order"), idemPayload(size.n, "id")
			for _, mode := range []string{"serial", "parallel"} {
				for _, s := range idemServers {
					b.Run(phase.name+"/"+size.name+"/"+mode+"/"+s.name, func(b *testing.B) {
						newSender := s.new(phase.first, data, resp, nil)
						// Warm up: the replay key is completed here, and pools are filled.
						if st := newSender()(); st != http.StatusCreated {
							b.Fatalf("warm-up: status %d", st)
						}
						b.SetBytes(int64(size.n))
						b.ReportAllocs()
						if mode == "serial" {
							send := newSender()
							for b.Loop() {
								if st := send(); st != http.StatusCreated {
									b.Fatalf("status %d", st)
								}
							}
							return
						}
						b.RunParallel(func(pb *testing.PB) {
							send := newSender()
							for pb.Next() {
								if st := send(); st != http.StatusCreated {
									b.Errorf("status %d", st)
									return
								}
							}
						})
					})
				}
			}
		}
	}
}
