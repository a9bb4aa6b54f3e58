package apierror_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
)

func TestRecover(t *testing.T) {
	var logs bytes.Buffer
	wr := apierror.Writer{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	tests := []struct {
		name  string
		value any
	}{
		{"error", errors.New("nil map write in handler")},
		{"string", "index out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs.Reset()
			h := apierror.WithRequestID(wr.Recover(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Half", "set before the panic")
				panic(tt.value)
			})))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/orders/ord_1", nil))
			require.Equal(t, http.StatusInternalServerError, rec.Code)
			require.NoError(t, apierror.CheckResponse(rec.Result()))
			require.Empty(t, rec.Header().Get("X-Half"), "the handler's headers are dropped")
			require.NotContains(t, rec.Body.String(), "range", "the panic is logged, never sent")
			var line struct {
				RequestID string `json:"request_id"`
				Error     string `json:"error"`
			}
			require.NoError(t, json.Unmarshal(logs.Bytes(), &line))
			require.Equal(t, rec.Header().Get(apierror.HeaderRequestID), line.RequestID)
			require.Contains(t, line.Error, "panic: ")
		})
	}
	t.Run("after the response started the panic goes on", func(t *testing.T) {
		h := wr.Recover(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			panic("late")
		}))
		require.PanicsWithValue(t, "late", func() {
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
		})
	})
	t.Run("ErrAbortHandler goes on", func(t *testing.T) {
		h := wr.Recover(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }))
		require.PanicsWithValue(t, http.ErrAbortHandler, func() {
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
		})
	})
	t.Run("the wrapped writer is reachable", func(t *testing.T) {
		h := wr.Recover(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			require.NoError(t, http.NewResponseController(w).Flush())
			panic("after a flush")
		}))
		require.Panics(t, func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil)) })
	})
}
