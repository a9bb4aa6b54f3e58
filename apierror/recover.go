package apierror

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
)

// Recover is middleware that turns a panic in next into the opaque 500 problem, with the request's
// ID, instead of net/http's answer to a panic: a connection closed with no response at all. The panic
// value is logged through the Writer's Logger (never sent). When next had already started its
// response, nothing more can be said on the wire: the connection is closed, as net/http would. A
// panic with http.ErrAbortHandler is net/http's way to abort a response and is passed on untouched.
func (wr Writer) Recover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tw := &startedWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler || tw.started {
				panic(v)
			}
			err, ok := v.(error)
			if !ok {
				err = fmt.Errorf("%v", v)
			}
			// Headers the handler set for the answer it meant to give (Location, ETag, …) do not
			// belong on the 500; the request ID does.
			h := w.Header()
			id := h.Values(HeaderRequestID)
			clear(h)
			if len(id) > 0 {
				h[HeaderRequestID] = id
			}
			wr.Write(w, r, &panicError{err: err})
		}()
		next.ServeHTTP(tw, r)
	})
}

// panicError is a recovered panic: not an *Error, so Write answers the opaque 500 and logs it.
type panicError struct{ err error }

func (e *panicError) Error() string { return "panic: " + e.err.Error() }
func (e *panicError) Unwrap() error { return e.err }

// startedWriter notes whether the response has started, so that Recover knows whether it can still
// answer.
type startedWriter struct {
	http.ResponseWriter
	started bool
}

func (w *startedWriter) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		w.started = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *startedWriter) Write(p []byte) (int, error) {
	w.started = true
	return w.ResponseWriter.Write(p)
}

// Flush counts as starting the response; http.ResponseController finds the rest through Unwrap.
func (w *startedWriter) Flush() {
	w.started = true
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack hands the connection over: nothing can be written after it.
func (w *startedWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("apierror: the ResponseWriter does not support Hijack")
	}
	w.started = true
	return h.Hijack()
}

func (w *startedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
