package requestlog

import (
	"bufio"
	"io"
	"net"
	"net/http"

	"github.com/svcplatform/conventions/internal/reqnote"
)

// responseWriter is the ResponseWriter the log's middleware hands on: it learns the status and
// nothing else (no byte of the body is looked at), and carries the request's note, so that one
// allocation serves both. Every other capability of the writer it wraps stays reachable: Flush,
// Hijack and ReadFrom are passed on, and Unwrap exposes it to http.ResponseController.
type responseWriter struct {
	http.ResponseWriter
	status int // 0 until the final status is known
	note   reqnote.Note
}

var (
	_ http.Flusher    = (*responseWriter)(nil)
	_ http.Hijacker   = (*responseWriter)(nil)
	_ io.ReaderFrom   = (*responseWriter)(nil)
	_ io.StringWriter = (*responseWriter)(nil)
)

func (w *responseWriter) WriteHeader(code int) {
	// 1xx other than 101 are informational (103 Early Hints): the final status follows.
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *responseWriter) WriteString(s string) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return io.WriteString(w.ResponseWriter, s)
}

// ReadFrom is io.Copy's path: it keeps the wrapped writer's (sendfile, for one).
func (w *responseWriter) ReadFrom(src io.Reader) (int64, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(writerOnly{w.ResponseWriter}, src)
}

// writerOnly hides ReadFrom from io.Copy, which would otherwise call it back.
type writerOnly struct{ io.Writer }

func (w *responseWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush for http.ResponseController, with the wrapped writer's error.
func (w *responseWriter) FlushError() error {
	if w.status == 0 {
		w.status = http.StatusOK // what net/http sends on a flush before any header
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack passes the wrapped writer's connection on; a request whose handler took the connection
// over without a status is recorded as 101 Switching Protocols.
func (w *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return conn, brw, err
}

// Unwrap returns the wrapped ResponseWriter, for http.ResponseController.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
