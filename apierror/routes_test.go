package apierror_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
)

func serve(h http.Handler, method, target string) *http.Response {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec.Result()
}

// conforming reads a problem response, checks it with apierror.Check and returns it parsed.
func conforming(t *testing.T, resp *http.Response) *apierror.Error {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, apierror.Check(resp.StatusCode, resp.Header, body), "body: %s", body)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	p, err := apierror.Parse(resp)
	require.NoError(t, err)
	return p
}

func TestServeMuxAnswersProblems(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		apierror.WriteJSON(w, r, http.StatusOK, map[string]string{"id": r.PathValue("id"), "pattern": r.Pattern})
	})
	mux.HandleFunc("DELETE /v1/orders/{id}", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("GET /v1/dir/", func(w http.ResponseWriter, r *http.Request) {})
	h := apierror.WithRequestID(apierror.Writer{}.ServeMux(mux))

	t.Run("matched route is served with its pattern and path values", func(t *testing.T) {
		resp := serve(h, http.MethodGet, "/v1/orders/ord_1")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		var got map[string]string
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
		require.Equal(t, map[string]string{"id": "ord_1", "pattern": "GET /v1/orders/{id}"}, got)
	})
	t.Run("unknown path is a located 404 problem", func(t *testing.T) {
		resp := serve(h, http.MethodGet, "/v1/nothing")
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		p := conforming(t, resp)
		require.Equal(t, apierror.CodeRouteNotFound, p.Code)
		require.Len(t, p.Errors, 1)
		require.Equal(t, apierror.LocationPath, p.Errors[0].Location)
	})
	t.Run("other method is a 405 problem with Allow and a located violation", func(t *testing.T) {
		resp := serve(h, http.MethodPost, "/v1/orders/ord_1")
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
		allow := strings.Split(resp.Header.Get("Allow"), ", ")
		require.ElementsMatch(t, []string{"GET", "HEAD", "DELETE"}, allow)
		require.Len(t, resp.Header.Values("Allow"), 1)
		p := conforming(t, resp)
		require.Equal(t, apierror.CodeMethodNotAllowed, p.Code)
		require.Len(t, p.Errors, 1)
		require.Equal(t, apierror.LocationPath, p.Errors[0].Location)
		require.Contains(t, p.Detail, "POST is not allowed here")
		for _, m := range allow {
			require.Contains(t, p.Errors[0].Detail, m)
		}
	})
	t.Run("a redirect of the mux passes through", func(t *testing.T) {
		resp := serve(h, http.MethodGet, "/v1/dir")
		require.Contains(t, []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect}, resp.StatusCode)
		require.Equal(t, "/v1/dir/", resp.Header.Get("Location"))
	})
	t.Run("an unmatched path shaped like a key is never echoed", func(t *testing.T) {
		const key = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
		resp := serve(h, http.MethodGet, "/v1/"+key)
		body, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		require.NotContains(t, string(body), key)
	})
	t.Run("an odd method is not repeated in the detail", func(t *testing.T) {
		req := httptest.NewRequest(http.MethodGet, "/v1/orders/ord_1", nil)
		req.Method = "SK_LIVE_XXXXXXXXXXXXXXXXXXXXXXXX"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
		require.NotContains(t, rec.Body.String(), req.Method)
	})
}

func TestRouterHooks(t *testing.T) {
	wr := apierror.Writer{TypeBase: "https://payments.example/problems/"}
	t.Run("not found", func(t *testing.T) {
		p := conforming(t, serve(apierror.WithRequestID(wr.NotFoundHandler()), http.MethodGet, "/x"))
		require.Equal(t, "https://payments.example/problems/route_not_found", p.Type)
	})
	t.Run("method not allowed takes the router's Allow", func(t *testing.T) {
		// chi sets Allow (one value per method) before it calls its MethodNotAllowed hook.
		router := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Add("Allow", "GET")
			w.Header().Add("Allow", "PUT")
			wr.MethodNotAllowedHandler().ServeHTTP(w, r)
		})
		resp := serve(apierror.WithRequestID(router), http.MethodPost, "/x")
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
		require.Equal(t, []string{"GET, PUT"}, resp.Header.Values("Allow"))
		p := conforming(t, resp)
		require.Equal(t, apierror.CodeMethodNotAllowed, p.Code)
	})
}

func TestWriterHandlerSetsTheServiceWriter(t *testing.T) {
	var logs bytes.Buffer
	service := apierror.Writer{TypeBase: "https://payments.example/problems/", Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	explicit := apierror.Writer{TypeBase: "https://other.example/p/"}
	mux := http.NewServeMux()
	mux.HandleFunc("/zero", func(w http.ResponseWriter, r *http.Request) {
		apierror.Writer{}.Write(w, r, apierror.MissingHeader("Idempotency-Key"))
	})
	mux.HandleFunc("/package", func(w http.ResponseWriter, r *http.Request) {
		apierror.Write(w, r, io.ErrUnexpectedEOF) // opaque 500, logged through the service's Logger
	})
	mux.HandleFunc("/explicit", func(w http.ResponseWriter, r *http.Request) {
		explicit.Write(w, r, apierror.MissingHeader("Idempotency-Key"))
	})
	mux.HandleFunc("/logger-only", func(w http.ResponseWriter, r *http.Request) {
		// A package that set only its own Logger still takes the service's type base.
		apierror.Writer{Logger: slog.New(slog.DiscardHandler)}.Write(w, r, apierror.MissingHeader("Idempotency-Key"))
	})
	h := apierror.WithRequestID(service.Handler(mux))
	require.Equal(t, "https://payments.example/problems/header_missing", conforming(t, serve(h, http.MethodGet, "/logger-only")).Type)

	require.Equal(t, "https://payments.example/problems/header_missing", conforming(t, serve(h, http.MethodGet, "/zero")).Type)
	p := conforming(t, serve(h, http.MethodGet, "/package"))
	require.Equal(t, "https://payments.example/problems/internal_error", p.Type)
	require.Contains(t, logs.String(), "unexpected EOF")
	require.Contains(t, logs.String(), p.RequestID)
	require.Equal(t, "https://other.example/p/header_missing", conforming(t, serve(h, http.MethodGet, "/explicit")).Type)
	// Outside the middleware the zero Writer keeps its documented defaults.
	require.Equal(t, apierror.DefaultTypeBase+"header_missing",
		conforming(t, serve(apierror.WithRequestID(mux), http.MethodGet, "/zero")).Type)
}

func TestWriteJSON(t *testing.T) {
	call := func(status int, v any) *http.Response {
		rec := httptest.NewRecorder()
		apierror.WriteJSON(rec, httptest.NewRequest(http.MethodGet, "/", nil), status, v)
		return rec.Result()
	}
	t.Run("one value, typed and sized", func(t *testing.T) {
		resp := call(http.StatusCreated, map[string]any{"id": "ord_1", "note": "<b>"})
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
		body, _ := io.ReadAll(resp.Body)
		require.Equal(t, resp.Header.Get("Content-Length"), itoa(len(body)))
		require.JSONEq(t, `{"id":"ord_1","note":"<b>"}`, string(body))
		require.True(t, bytes.HasSuffix(body, []byte("}\n")))
	})
	t.Run("a value that cannot be marshalled is the opaque 500, not half a 200", func(t *testing.T) {
		resp := call(http.StatusOK, map[string]any{"c": make(chan int)})
		require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
		require.Equal(t, apierror.MediaType, resp.Header.Get("Content-Type"))
		require.Empty(t, resp.Header.Get("Content-Length"))
	})
	for _, status := range []int{http.StatusNoContent, http.StatusNotFound, http.StatusMovedPermanently, 0} {
		t.Run("status "+itoa(status)+" is a programming error", func(t *testing.T) {
			resp := call(status, map[string]string{"a": "b"})
			require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
			require.Equal(t, apierror.MediaType, resp.Header.Get("Content-Type"))
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestRequestIDsAdoptsAnUpstreamID(t *testing.T) {
	type ctxKey struct{}
	// upstream stands in for chi's middleware.RequestID: it puts an ID in the context.
	upstream := func(id string, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, id)))
		})
	}
	from := func(r *http.Request) string { s, _ := r.Context().Value(ctxKey{}).(string); return s }
	var seen string
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = apierror.RequestIDFromContext(r.Context())
		apierror.Write(w, r, apierror.MissingHeader("Idempotency-Key"))
	})
	tests := []struct {
		name, upstream string
		adopted        bool
	}{
		{"chi-shaped ID is adopted", "api-7f9c/Qx3PZ0aBcd-000042", true},
		{"gateway ID is adopted", "8a1f2c3d-4e5f-6789-abcd-ef0123456789", true},
		{"a key is never adopted", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", false},
		{"a header-breaking value is never adopted", "a b\r\nSet-Cookie: x", false},
		{"empty means an ID of our own", "", false},
		{"too long is refused", strings.Repeat("a", 129), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := upstream(tc.upstream, apierror.RequestIDs{From: from}.Handler(inner))
			resp := serve(h, http.MethodPost, "/")
			p := conforming(t, resp)
			require.Equal(t, seen, p.RequestID)
			require.Equal(t, seen, resp.Header.Get(apierror.HeaderRequestID))
			if tc.adopted {
				require.Equal(t, tc.upstream, seen)
			} else {
				require.True(t, strings.HasPrefix(seen, "req_"), seen)
			}
		})
	}
}
