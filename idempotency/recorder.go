package idempotency

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/svcplatform/conventions/idempotency/internal/fields"
)

// ErrHijackRefused is what a governed handler gets when it tries to hijack the connection: bytes
// written to a hijacked connection cannot be captured for replay, so a retry could not be answered
// without running the handler again. Upgrade-style endpoints (WebSocket) should not be governed: leave
// GET out of Options.Methods, as it is by default.
var ErrHijackRefused = errors.New("idempotency: connection hijacking is refused on idempotent requests")

// recorder is the ResponseWriter a governed handler writes to. Every path by which bytes reach the
// client — Write, ReadFrom (io.Copy), WriteString, Flush — goes through capture; Hijack is refused.
// Unwrap exposes the underlying writer to http.ResponseController for deadlines and full duplex;
// ResponseController's Flush and Hijack reach this recorder's methods first, so they cannot bypass it.
//
// In streaming mode (the default) bytes go to the client as the handler writes them, and a copy of
// up to maxResponseBytes is kept. In buffered mode (transactional) nothing reaches the client until
// flushTo, after the commit.
type recorder struct {
	w        http.ResponseWriter
	m        *Middleware
	buffered bool

	header      http.Header    // buffered mode: the handler's header map
	status      int            // 0 until the final status is known
	fields      []fields.Field // the allow-listed headers as they were when the status was written
	hdr         http.Header    // fields as a map, for stores other than memstore.Store
	body        []byte
	overflow    bool // the body went over maxResponseBytes and is not kept
	wroteHeader bool

	plain        []byte // the record to seal: status, headers and body (Options.Sealer), reused
	sealed       []byte // the sealed record (Options.Sealer), reused
	notPerformed bool   // the handler said it did nothing (NotPerformed)
	secret       bool   // the response carries a secret (Secret)
}

var (
	_ http.ResponseWriter = (*recorder)(nil)
	_ http.Flusher        = (*recorder)(nil)
	_ http.Hijacker       = (*recorder)(nil)
	_ io.ReaderFrom       = (*recorder)(nil)
	_ io.StringWriter     = (*recorder)(nil)
)

func (rec *recorder) reset(w http.ResponseWriter, m *Middleware, buffered bool) {
	rec.w, rec.m, rec.buffered = w, m, buffered
	rec.status, rec.overflow, rec.wroteHeader = 0, false, false
	rec.notPerformed, rec.secret = false, false
	rec.body = rec.body[:0]
	clear(rec.fields)
	rec.fields = rec.fields[:0]
	if buffered {
		if rec.header == nil {
			rec.header = make(http.Header)
		}
		clear(rec.header)
	}
}

// release drops references before the recorder goes back to the pool.
func (rec *recorder) release() {
	rec.w, rec.m = nil, nil
	if cap(rec.body) > maxPooledBuffer {
		rec.body = nil
	}
	if cap(rec.sealed) > maxPooledBuffer {
		rec.sealed = nil
	}
	if cap(rec.plain) > maxPooledBuffer {
		rec.plain = nil
	}
	clear(rec.fields)
	if rec.hdr != nil {
		clear(rec.hdr)
	}
	// The buffered-mode header map is cleared by the next reset that needs it.
}

func (rec *recorder) Header() http.Header {
	if rec.buffered {
		return rec.header
	}
	return rec.w.Header()
}

func (rec *recorder) WriteHeader(code int) {
	if rec.wroteHeader {
		return // superfluous, as net/http ignores it
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		// Informational (103 Early Hints): not the response, not stored.
		if !rec.buffered {
			rec.w.WriteHeader(code)
		}
		return
	}
	rec.wroteHeader = true
	rec.status = code
	rec.takeSnapshot()
	if !rec.buffered {
		rec.w.WriteHeader(code)
	}
}

// takeSnapshot keeps the allow-listed headers as they are now: once the status is written, later
// changes to the header map do not reach the client, so they must not reach the replay either.
func (rec *recorder) takeSnapshot() {
	h := rec.Header()
	rec.fields = rec.fields[:0]
	for _, k := range rec.m.replayHeaders {
		if vs, ok := h[k]; ok {
			rec.fields = append(rec.fields, fields.Field{Name: k, Vals: vs})
		}
	}
}

func (rec *recorder) Write(p []byte) (int, error) {
	if !rec.wroteHeader {
		rec.WriteHeader(http.StatusOK)
	}
	rec.capture(p)
	if rec.buffered {
		return len(p), nil
	}
	return rec.w.Write(p)
}

func (rec *recorder) WriteString(s string) (int, error) {
	if !rec.wroteHeader {
		rec.WriteHeader(http.StatusOK)
	}
	rec.captureString(s)
	if rec.buffered {
		return len(s), nil
	}
	return io.WriteString(rec.w, s)
}

func (rec *recorder) capture(p []byte) {
	if rec.overflow {
		return
	}
	if int64(len(rec.body))+int64(len(p)) > rec.m.maxResponseBytes {
		rec.overflow = true
		rec.body = rec.body[:0]
		return
	}
	rec.body = append(rec.body, p...)
}

func (rec *recorder) captureString(s string) {
	if rec.overflow {
		return
	}
	if int64(len(rec.body))+int64(len(s)) > rec.m.maxResponseBytes {
		rec.overflow = true
		rec.body = rec.body[:0]
		return
	}
	rec.body = append(rec.body, s...)
}

// copyBufPool holds ReadFrom's buffers.
var copyBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// ReadFrom is io.Copy's path. It must not hand src to the underlying writer's ReadFrom (sendfile
// would skip the capture), so it copies through Write.
func (rec *recorder) ReadFrom(src io.Reader) (int64, error) {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	return io.CopyBuffer(writerOnly{rec}, src, *bp)
}

// writerOnly hides ReadFrom from io.CopyBuffer, which would otherwise call it back.
type writerOnly struct{ io.Writer }

// Flush sends what was written so far to the client (streaming mode); in buffered mode nothing may
// reach the client before the commit, so it does nothing.
func (rec *recorder) Flush() { _ = rec.FlushError() }

// FlushError is Flush for http.ResponseController.
func (rec *recorder) FlushError() error {
	if !rec.wroteHeader {
		rec.WriteHeader(http.StatusOK)
	}
	if rec.buffered {
		return nil
	}
	return http.NewResponseController(rec.w).Flush()
}

// Hijack is refused: see ErrHijackRefused.
func (rec *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, ErrHijackRefused
}

// Unwrap returns the underlying ResponseWriter, for http.ResponseController.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.w }

// finalStatus is the status the handler answered, 200 when it wrote nothing.
func (rec *recorder) finalStatus() int {
	if rec.status == 0 {
		return http.StatusOK
	}
	return rec.status
}

// finalize fixes the status of a handler that wrote nothing: net/http answers 200 with the headers
// as they are when the handler returns.
func (rec *recorder) finalize() {
	if !rec.wroteHeader {
		rec.status = http.StatusOK
		rec.takeSnapshot()
		rec.wroteHeader = true
	}
}

// storedFields returns the status, header fields and body to store: the captured ones, or, when the
// body went over the cap (omitted), the original status and allow-listed headers without
// Content-Type (there is no content), marked with HeaderBodyOmitted. They belong to the recorder: the
// store copies them.
func (rec *recorder) storedFields(omitted bool) (int, []fields.Field, []byte) {
	if !omitted {
		return rec.status, rec.fields, rec.body
	}
	fs := make([]fields.Field, 0, len(rec.fields)+1)
	for _, f := range rec.fields {
		if f.Name != "Content-Type" {
			fs = append(fs, f)
		}
	}
	fs = append(fs, fields.Field{Name: HeaderBodyOmitted, Vals: []string{"true"}})
	return rec.status, fs, nil
}

// response is storedFields' result as a Response, for stores other than memstore.Store; the header
// map is the recorder's, reused.
func (rec *recorder) response(status int, fs []fields.Field, body []byte) Response {
	if rec.hdr == nil {
		rec.hdr = make(http.Header, len(fs))
	}
	clear(rec.hdr)
	for _, f := range fs {
		rec.hdr[f.Name] = f.Vals
	}
	return Response{Status: status, Header: rec.hdr, Body: body}
}

// flushTo writes a buffered response to the client, after the commit.
func (rec *recorder) flushTo(w http.ResponseWriter) {
	h := w.Header()
	for k, vs := range rec.header {
		h[k] = vs
	}
	if !rec.wroteHeader {
		rec.status = http.StatusOK
	}
	w.WriteHeader(rec.status)
	if len(rec.body) > 0 {
		_, _ = w.Write(rec.body)
	}
}

// recorderOf finds the middleware's recorder behind w, through any wrappers that implement Unwrap.
func recorderOf(w http.ResponseWriter) *recorder {
	for w != nil {
		switch v := w.(type) {
		case *recorder:
			return v
		case interface{ Unwrap() http.ResponseWriter }:
			w = v.Unwrap()
		default:
			return nil
		}
	}
	return nil
}

// NotPerformed tells the middleware that the handler writing to w did nothing: it refused the request
// before any side effect (its input failed validation, say). A 4xx response so marked is not stored:
// the key is released, so a retry with the same key — typically with corrected input — runs the
// handler again, and junk requests do not fill the store. This is Stripe's rule: results are saved
// only once an endpoint started executing. Other statuses are stored as usual, whatever the mark (a
// 2xx did something; a 5xx may have), so a wrong mark can never make an action run twice.
//
// It reports whether w belongs to a governed request (false: nothing to do). Call it from the
// handler's goroutine, before or after writing the response.
func NotPerformed(w http.ResponseWriter) bool {
	rec := recorderOf(w)
	if rec == nil {
		return false
	}
	rec.notPerformed = true
	return true
}

// Secret tells the middleware that the response being written to w carries a secret that must never
// be stored in plain text or cached: an API key or a signing secret shown once. The response gets
// Cache-Control: no-store (when the status has not been written yet; call Secret first). Its record:
//
//   - with Options.Sealer, is stored sealed, like every record then, and replayed in full to the same
//     credential with the same key (the client that lost the first answer gets its secret);
//   - without a Sealer, is stored without its body: a replay carries the original status and
//     allow-listed headers (Location, say), an empty body and Idempotent-Body-Omitted: true, so the
//     client learns the action happened (and should rotate the secret it never saw), and the handler
//     never runs twice.
//
// It reports whether w belongs to a governed request.
func Secret(w http.ResponseWriter) bool {
	rec := recorderOf(w)
	if rec == nil {
		return false
	}
	rec.secret = true
	if !rec.wroteHeader {
		rec.Header().Set("Cache-Control", "no-store")
	}
	return true
}

// stored returns a deep copy of what is to be stored, for a completion that outlives the request.
func (rec *recorder) stored(omitted bool) Response {
	status, fs, body := rec.storedFields(omitted)
	resp := Response{Status: status, Header: make(http.Header, len(fs))}
	for _, f := range fs {
		resp.Header[f.Name] = append([]string(nil), f.Vals...)
	}
	if len(body) > 0 {
		resp.Body = append([]byte(nil), body...)
	}
	return resp
}
