package benchmarks

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/idempotency"
)

// The benchmarks only mean something if every library does the real work on the inputs: these tests
// check that each verifier accepts its prepared delivery and rejects the same delivery with one body
// byte changed, and that each signer and problem writer produces what it claims.

func TestEventBodyIsJSONOfExactSize(t *testing.T) {
	for _, size := range bodySizes {
		t.Run(size.name, func(t *testing.T) {
			b := eventBody(size.n)
			require.Len(t, b, size.n)
			require.True(t, json.Valid(b))
		})
	}
}

func TestVerifyCasesAcceptAndReject(t *testing.T) {
	for _, c := range verifyCases() {
		for _, size := range bodySizes {
			t.Run(c.name+"/"+size.name, func(t *testing.T) {
				body := eventBody(size.n)
				op := c.setup(t, body, time.Now())
				require.NoError(t, op())
				body[len(body)/2] ^= 1 // the closure verifies this same slice
				require.Error(t, op(), "a changed body must not verify")
			})
		}
	}
}

func TestSignCasesSign(t *testing.T) {
	for _, c := range signCases() {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, c.setup(t, eventBody(1<<10), time.Now())())
		})
	}
}

func TestProblemCasesWriteTheSameProblem(t *testing.T) {
	for _, c := range problemCases() {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			c.setup(t)(rec, problemRequest())
			require.Equal(t, http.StatusBadRequest, rec.Code)
			require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
			var got struct {
				Status int               `json:"status"`
				Title  string            `json:"title"`
				Errors []json.RawMessage `json:"errors"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
			require.Equal(t, http.StatusBadRequest, got.Status)
			require.NotEmpty(t, got.Title)
			require.Len(t, got.Errors, 2, "two violations, each located")
			require.Contains(t, string(got.Errors[0]), "account")
			require.Contains(t, string(got.Errors[1]), "side")
		})
	}
}

func TestDiscardWriter(t *testing.T) {
	w := newDiscardWriter()
	w.Header().Set("X-A", "1")
	n, err := w.Write([]byte("abc"))
	require.NoError(t, err)
	require.Equal(t, 3, n)
	w.WriteHeader(http.StatusTeapot) // after Write: ignored, as net/http does
	require.Equal(t, http.StatusOK, w.status)
	w.reset()
	require.Empty(t, w.Header())
	require.Zero(t, w.status)
	require.Zero(t, w.n)
}

func TestIdempotencyServers(t *testing.T) {
	for _, s := range idemServers {
		for _, size := range idemSizes {
			data, resp := idemPayload(size.n, "order"), idemPayload(size.n, "id")
			t.Run(s.name+"/"+size.name+"/first", func(t *testing.T) {
				var runs atomic.Int64
				send := s.new(true, data, resp, &runs)()
				for range 3 {
					require.Equal(t, http.StatusCreated, send())
				}
				require.EqualValues(t, 3, runs.Load(), "every new key runs the handler")
			})
			t.Run(s.name+"/"+size.name+"/replay", func(t *testing.T) {
				var runs atomic.Int64
				newSender := s.new(false, data, resp, &runs)
				send := newSender()
				for range 3 {
					require.Equal(t, http.StatusCreated, send())
				}
				require.Equal(t, http.StatusCreated, newSender()(), "another client replays too")
				want := int64(1)
				if s.name == "nethttp" || s.name == "fiberbare" {
					want = 4 // no middleware: nothing is replayed
				}
				require.Equal(t, want, runs.Load())
			})
		}
	}
}

// The replays must be whole responses: ours marks them and both send the stored body byte for byte.
func TestIdempotencyReplaysAreComplete(t *testing.T) {
	data, resp := idemPayload(256, "order"), idemPayload(256, "id")
	t.Run("ours", func(t *testing.T) {
		h := newOurs(false, orderHandler(resp, nil))
		c := newHTTPClient(data)
		require.Equal(t, http.StatusCreated, c.do(h, nil))
		rec := httptest.NewRecorder()
		r := c.tmpl
		c.body.Reset(data)
		r.Body = c.body
		h.ServeHTTP(rec, &r)
		require.Equal(t, http.StatusCreated, rec.Code)
		require.Equal(t, "true", rec.Header().Get(idempotency.HeaderReplayed))
		require.Equal(t, "/v1/orders/ord_1", rec.Header().Get("Location"))
		require.Equal(t, resp, rec.Body.Bytes())
	})
	t.Run("fiber", func(t *testing.T) {
		h := newFiber(true, false, fiberOrderHandler(resp, nil))
		c := newFiberClient(data)
		require.Equal(t, http.StatusCreated, c.do(h, nil))
		require.Equal(t, http.StatusCreated, c.do(h, nil))
		require.Equal(t, resp, c.ctx.Response.Body())
		require.Equal(t, "/v1/orders/ord_1", string(c.ctx.Response.Header.Peek("Location")))
	})
	t.Run("ours refuses a changed body under the same key", func(t *testing.T) {
		h := newOurs(false, orderHandler(resp, nil))
		require.Equal(t, http.StatusCreated, newHTTPClient(data).do(h, nil))
		require.Equal(t, http.StatusUnprocessableEntity, newHTTPClient(idemPayload(256, "other")).do(h, nil))
	})
}

func TestIdemKeysAreDistinctUUIDShapes(t *testing.T) {
	var buf [36]byte
	seen := map[string]bool{}
	for _, i := range []uint64{0, 1, 9, 10, 123456789012} {
		k := string(idemKey(&buf, i))
		require.Len(t, k, 36)
		require.False(t, seen[k], "key %d repeats", i)
		seen[k] = true
	}
	require.Equal(t, "00000000-0000-4000-8000-123456789012", string(idemKey(&buf, 123456789012)))
}
