package versioning_test

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/versioning"
)

const orderV1 = `{"account":"acc_1","amount":"10.50","created":1767225600,"currency":"EUR","direction":"buy","id":"ord_1","object":"order","status":"created"}` + "\n"

func shapeRouter(t *testing.T, mod func(*versioning.Options)) *versioning.Router {
	t.Helper()
	opts := &versioning.Options{Now: newClock(testNow).Now}
	if mod != nil {
		mod(opts)
	}
	return must(versioning.New(fixtureRegistry(t), opts))
}

func TestResponseShaping(t *testing.T) {
	h := shapeRouter(t, nil).Handler(newestOrderHandler())
	cases := []struct {
		name, path, reqBody, wantBody, seenBody string
	}{
		{"newest passes through", "/v3/orders", `{"side":"buy"}`, orderJSON + "\n", `{"side":"buy"}`},
		{"v2 one step", "/v2/orders", `{"side":"buy","amount":"1","currency":"EUR"}`,
			`{"account":"acc_1","amount":"10.50","created":1767225600,"currency":"EUR","id":"ord_1","object":"order","side":"buy","status":"created"}` + "\n",
			`{"amount":{"currency":"EUR","value":"1"},"side":"buy"}`},
		{"v1 two steps", "/v1/orders", `{"direction":"buy","amount":"1","currency":"EUR"}`, orderV1,
			`{"amount":{"currency":"EUR","value":"1"},"side":"buy"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := do(t, h, request{method: "POST", path: tc.path, body: tc.reqBody})
			require.Equal(t, http.StatusCreated, w.Code, "the handler's status is kept")
			require.Equal(t, "application/json", w.Header().Get("Content-Type"))
			require.Equal(t, "/orders/ord_1", w.Header().Get("Location"), "the handler's headers are kept")
			require.Equal(t, tc.wantBody, w.Body.String())
			if tc.path != "/v3/orders" {
				require.Equal(t, strconv.Itoa(len(tc.wantBody)), w.Header().Get("Content-Length"))
			}
			require.Equal(t, tc.seenBody, w.Header().Get("X-Seen-Body"), "the handler reads the newest request shape")
		})
	}
}

// writes builds a handler from a write sequence, for the writer's edge cases.
func writes(fn func(w http.ResponseWriter, r *http.Request)) http.Handler {
	return http.HandlerFunc(fn)
}

func TestShapingWriterPaths(t *testing.T) {
	v3order := []byte(orderJSON)
	cases := []struct {
		name     string
		method   string
		h        http.Handler
		status   int
		body     string
		headers  map[string]string // "" means absent
		flushed  bool
		opts     func(*versioning.Options)
		location bool
	}{
		{"many small writes", "GET", writes(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			for _, b := range v3order {
				_, _ = w.Write([]byte{b})
			}
		}), 200, strings.TrimSuffix(orderV1, "\n"), map[string]string{"Content-Length": strconv.Itoa(len(orderV1) - 1)}, false, nil, false},
		{"io.Copy cannot bypass the capture", "GET", writes(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.Copy(w, strings.NewReader(orderJSON))
		}), 200, strings.TrimSuffix(orderV1, "\n"), nil, false, nil, false},
		{"Flush while buffering sends nothing early", "GET", writes(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(v3order[:10])
			require.NoError(t, http.NewResponseController(w).Flush())
			w.(http.Flusher).Flush()
			_, _ = w.Write(v3order[10:])
		}), 200, strings.TrimSuffix(orderV1, "\n"), nil, false, nil, false},
		{"Hijack refused while buffering", "GET", writes(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(v3order)
			_, _, err := http.NewResponseController(w).Hijack()
			require.ErrorIs(t, err, versioning.ErrHijackWhileShaping)
		}), 200, strings.TrimSuffix(orderV1, "\n"), nil, false, nil, false},
		{"validators dropped", "GET", writes(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("ETag", `"abc"`)
			w.Header().Set("Content-Digest", "sha-256=:x:")
			w.Header().Set("Cache-Control", "no-store")
			_, _ = w.Write(v3order)
		}), 200, strings.TrimSuffix(orderV1, "\n"), map[string]string{"Etag": "", "Content-Digest": "", "Cache-Control": "no-store"}, false, nil, false},
		{"handler's Content-Length corrected", "GET", writes(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(v3order)))
			_, _ = w.Write(v3order)
		}), 200, strings.TrimSuffix(orderV1, "\n"), map[string]string{"Content-Length": strconv.Itoa(len(orderV1) - 1)}, false, nil, false},
		{"problem+json is the same in every version", "GET", writes(func(w http.ResponseWriter, r *http.Request) {
			apierror.Write(w, r, apierror.Invalid(apierror.Body("/side", "invalid_enum", "must be one of buy, sell")))
		}), 400, "", nil, false, nil, false},
		{"non-JSON passes through and flushes", "GET", writes(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/csv")
			_, _ = io.WriteString(w, "side\nbuy\n")
			require.NoError(t, http.NewResponseController(w).Flush())
		}), 200, "side\nbuy\n", map[string]string{"Content-Length": ""}, true, nil, false},
		{"no content type passes through", "GET", writes(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, orderJSON)
		}), 200, orderJSON, nil, false, nil, false},
		{"Flush before any write passes a non-JSON response", "GET", writes(func(w http.ResponseWriter, r *http.Request) {
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, "x")
		}), 200, "x", nil, true, nil, false},
		{"204 passes through", "DELETE", writes(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNoContent)
		}), 204, "", nil, false, nil, false},
		{"HEAD: no body, no stale length", "HEAD", writes(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(v3order)))
			w.Header().Set("ETag", `"abc"`)
			w.WriteHeader(200)
		}), 200, "", map[string]string{"Content-Length": "", "Etag": ""}, false, nil, false},
		{"encoded body passes through", "GET", writes(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write([]byte("\x1f\x8b..."))
		}), 200, "\x1f\x8b...", nil, false, nil, false},
		{"empty JSON body", "GET", writes(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(202)
		}), 202, "", map[string]string{"Content-Length": "0"}, false, nil, false},
		{"body not JSON despite the type", "GET", writes(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, "{oops")
		}), 200, "{oops", nil, false, nil, false},
		{"superfluous WriteHeader ignored", "GET", writes(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(201)
			w.WriteHeader(500)
			_, _ = w.Write(v3order)
		}), 201, strings.TrimSuffix(orderV1, "\n"), nil, false, nil, false},
		{"too large: 500, handler's headers gone", "GET", writes(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Location", "/orders/ord_1")
			_, err := w.Write(v3order)
			require.ErrorIs(t, err, versioning.ErrResponseTooLarge)
			_, err = w.Write([]byte("{}"))
			require.ErrorIs(t, err, versioning.ErrResponseTooLarge)
		}), 500, "", map[string]string{"Location": ""}, false, func(o *versioning.Options) { o.MaxResponseBody = 64 }, false},
		{"no cap", "GET", writes(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(v3order)
		}), 200, strings.TrimSuffix(orderV1, "\n"), nil, false, func(o *versioning.Options) { o.MaxResponseBody = -1 }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := shapeRouter(t, tc.opts).Handler(tc.h)
			r := httptest.NewRequest(tc.method, "/v1/orders", nil)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			require.Equal(t, tc.status, w.Code)
			require.Equal(t, "v1", w.Header().Get(versioning.HeaderVersion), "every response echoes the version")
			require.NotEmpty(t, w.Header().Get("Deprecation"))
			if tc.status == 500 {
				problem(t, w, 500, apierror.CodeInternal)
			} else if tc.status == 400 {
				problem(t, w, 400, "invalid_enum")
			} else {
				require.Equal(t, tc.body, w.Body.String())
			}
			for k, v := range tc.headers {
				require.Equal(t, v, w.Header().Get(k), k)
			}
			require.Equal(t, tc.flushed, w.Flushed)
		})
	}
}

func TestShapingTransformFailure(t *testing.T) {
	var logs bytes.Buffer
	reg, err := versioning.NewRegistry([]versioning.Version{{Name: "v1"}, {Name: "v2"}}, []versioning.Change{{
		Name: "explodes", Version: "v2", Response: func(map[string]any) error { return errors.New("boom") },
	}})
	require.NoError(t, err)
	rt := must(versioning.New(reg, &versioning.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
	w := do(t, rt.Handler(newestOrderHandler()), request{method: "POST", path: "/v1/orders", body: "{}"})
	problem(t, w, 500, apierror.CodeInternal)
	require.Empty(t, w.Header().Get("Location"))
	require.Equal(t, "v1", w.Header().Get(versioning.HeaderVersion))
	require.NotContains(t, w.Body.String(), "boom", "the cause is logged, never sent")
	require.Contains(t, logs.String(), "explodes")
	require.Contains(t, logs.String(), "boom")
}

func TestUnwrap(t *testing.T) {
	var inner http.ResponseWriter
	rec := httptest.NewRecorder()
	h := shapeRouter(t, nil).Handler(writes(func(w http.ResponseWriter, r *http.Request) {
		inner = w.(interface{ Unwrap() http.ResponseWriter }).Unwrap()
		// Deadlines reach the real writer through Unwrap (the recorder does not support them).
		err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Second))
		require.ErrorIs(t, err, http.ErrNotSupported)
	}))
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/orders", nil))
	require.Same(t, rec, inner)
}

func TestRequestShaping(t *testing.T) {
	seen := func(w *httptest.ResponseRecorder) string { return w.Header().Get("X-Seen-Body") }
	h := shapeRouter(t, func(o *versioning.Options) { o.MaxRequestBody = 256 }).Handler(newestOrderHandler())
	t.Run("malformed JSON reaches the handler unchanged", func(t *testing.T) {
		w := do(t, h, request{method: "POST", path: "/v1/orders", body: `{"direction":`})
		require.Equal(t, `{"direction":`, seen(w))
	})
	t.Run("non-JSON body not read", func(t *testing.T) {
		w := do(t, h, request{method: "POST", path: "/v1/orders", body: `direction=buy`, contentType: "application/x-www-form-urlencoded"})
		require.Equal(t, `direction=buy`, seen(w))
	})
	t.Run("too large", func(t *testing.T) {
		w := do(t, h, request{method: "POST", path: "/v1/orders", body: `{"x":"` + strings.Repeat("a", 300) + `"}`})
		p := problem(t, w, 413, apierror.CodeBodyTooLarge)
		require.Contains(t, p.Detail, "256")
		require.Equal(t, "v1", w.Header().Get(versioning.HeaderVersion))
	})
	t.Run("at the limit", func(t *testing.T) {
		body := `{"x":"` + strings.Repeat("a", 256-8) + `"}`
		require.Len(t, body, 256)
		w := do(t, h, request{method: "POST", path: "/v1/orders", body: body})
		require.Equal(t, 201, w.Code)
	})
	t.Run("outer MaxBytesReader", func(t *testing.T) {
		outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Body = http.MaxBytesReader(w, r.Body, 10)
			h.ServeHTTP(w, r)
		})
		w := do(t, outer, request{method: "POST", path: "/v1/orders", body: `{"direction":"buy"}`})
		problem(t, w, 413, apierror.CodeBodyTooLarge)
	})
	t.Run("unreadable body", func(t *testing.T) {
		r := httptest.NewRequest("POST", "/v1/orders", io.MultiReader(strings.NewReader(`{"a"`), errReader{}))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		problem(t, w, 400, "body_unreadable")
	})
	t.Run("length headers follow the new body", func(t *testing.T) {
		var cl int64
		var hdr string
		h := shapeRouter(t, nil).Handler(writes(func(w http.ResponseWriter, r *http.Request) {
			cl, hdr = r.ContentLength, r.Header.Get("Content-Length")
			b, _ := io.ReadAll(r.Body)
			require.Len(t, b, int(cl))
			rb, err := r.GetBody()
			require.NoError(t, err)
			b2, _ := io.ReadAll(rb)
			require.Equal(t, b, b2)
		}))
		r := httptest.NewRequest("POST", "/v1/orders", strings.NewReader(`{"direction":"buy"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Content-Length", "19")
		h.ServeHTTP(httptest.NewRecorder(), r)
		require.EqualValues(t, len(`{"side":"buy"}`), cl)
		require.Equal(t, strconv.Itoa(len(`{"side":"buy"}`)), hdr)
		require.Equal(t, "19", r.Header.Get("Content-Length"), "the caller's request header is untouched")
	})
	t.Run("located problem from a request transform", func(t *testing.T) {
		reg, err := versioning.NewRegistry([]versioning.Version{{Name: "v1"}, {Name: "v2"}}, []versioning.Change{{
			Name: "side_required", Version: "v2",
			Request: func(b map[string]any) error {
				if _, ok := b["direction"].(string); !ok {
					return apierror.Invalid(apierror.Body("/direction", "wrong_type", "must be a string"))
				}
				return nil
			},
		}})
		require.NoError(t, err)
		h := must(versioning.New(reg, nil)).Handler(newestOrderHandler())
		w := do(t, h, request{method: "POST", path: "/v1/orders", body: `{"direction":1}`})
		p := problem(t, w, 400, "wrong_type")
		require.Equal(t, "/direction", p.Errors[0].Pointer)
		reg2, err := versioning.NewRegistry([]versioning.Version{{Name: "v1"}, {Name: "v2"}}, []versioning.Change{{
			Name: "explodes", Version: "v2", Request: func(map[string]any) error { return errors.New("boom") },
		}})
		require.NoError(t, err)
		w = do(t, must(versioning.New(reg2, nil)).Handler(newestOrderHandler()), request{method: "POST", path: "/v1/orders", body: `{}`})
		problem(t, w, 500, apierror.CodeInternal)
	})
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// A handler's JSON decoder (apierror.Decode among them) reads the body whatever its Content-Type, so
// an older version's JSON object must be shaped whatever the client declared: curl -d sends
// application/x-www-form-urlencoded, PATCH clients send application/merge-patch+json, some send
// nothing. Skipping those handed the newest handler a body in an older shape.
func TestRequestShapingIgnoresContentType(t *testing.T) {
	h := shapeRouter(t, func(o *versioning.Options) { o.MaxRequestBody = 256 }).Handler(newestOrderHandler())
	const want = `{"amount":{"currency":"EUR","value":"1"},"side":"buy"}`
	cases := []struct {
		name, contentType, body, seen string
	}{
		{"no Content-Type", "", `{"direction":"buy","amount":"1","currency":"EUR"}`, want},
		{"curl -d default", "application/x-www-form-urlencoded", `{"direction":"buy","amount":"1","currency":"EUR"}`, want},
		{"merge patch", "application/merge-patch+json", `{"direction":"buy","amount":"1","currency":"EUR"}`, want},
		{"text/plain with leading space", "text/plain", " \n\t{\"direction\":\"buy\",\"amount\":\"1\",\"currency\":\"EUR\"}", want},
		{"form body untouched", "application/x-www-form-urlencoded", `direction=buy`, `direction=buy`},
		{"leading space kept on a non-object", "text/plain", "  direction", "  direction"},
		{"JSON array untouched", "", `[{"direction":"buy"}]`, `[{"direction":"buy"}]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(tc.body))
			if tc.contentType != "" {
				r.Header.Set("Content-Type", tc.contentType)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
			require.Equal(t, tc.seen, w.Header().Get("X-Seen-Body"))
		})
	}
	t.Run("a large non-JSON upload is not capped", func(t *testing.T) {
		body := strings.Repeat("x", 1024)
		r := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/octet-stream")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
		require.Equal(t, body, w.Header().Get("X-Seen-Body"))
	})
	t.Run("an object over the cap is refused whatever its Content-Type", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(`{"x":"`+strings.Repeat("a", 300)+`"}`))
		r.Header.Set("Content-Type", "text/plain")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		problem(t, w, http.StatusRequestEntityTooLarge, apierror.CodeBodyTooLarge)
	})
}

// D10, issue 30: a transform failure is logged with the path and the cause, and both may quote what the
// client sent; the log line carries neither verbatim when it holds a credential-shaped value.
func TestShapingTransformFailureLogsNoCredential(t *testing.T) {
	for _, secret := range credentials {
		var logs bytes.Buffer
		reg, err := versioning.NewRegistry([]versioning.Version{{Name: "v1"}, {Name: "v2"}}, []versioning.Change{{
			Name: "explodes", Version: "v2", Response: func(map[string]any) error { return errors.New("cannot shape " + secret) },
		}})
		require.NoError(t, err)
		rt := must(versioning.New(reg, &versioning.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
		w := do(t, rt.Handler(newestOrderHandler()), request{method: "POST", path: "/v1/orders/" + secret, body: "{}"})
		problem(t, w, 500, apierror.CodeInternal)
		require.Contains(t, logs.String(), "explodes")
		require.NotContains(t, logs.String(), secret)
	}
}
