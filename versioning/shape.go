package versioning

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/webhook"
)

// serveShaped runs next with a writer that buffers its JSON output and, once next returns, writes
// the body transformed to version i, with the status and headers next chose and a correct
// Content-Length.
func (rt *Router) serveShaped(w http.ResponseWriter, r *http.Request, i int, next http.Handler) {
	buf := shapeBufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= 64<<10 {
			shapeBufPool.Put(buf)
		}
	}()
	// What the response carried before the handler: restored if the body cannot be shaped.
	saved := w.Header().Clone()
	sw := &shapingWriter{w: w, rt: rt, r: r, buf: buf}
	next.ServeHTTP(sw, r)
	sw.finish(i, saved)
}

var shapeBufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const (
	modeUndecided = iota // nothing written yet
	modeBuffer           // a JSON body is being captured for shaping
	modePass             // not shapeable: everything goes straight through
	modeHijacked         // the handler took the connection
)

// shapingWriter captures a JSON response for shaping. Every way out is covered: WriteHeader and
// Write are held back, Flush is a no-op while buffering (the body leaves whole, once shaped), Hijack
// is refused while buffering, and there is no ReadFrom, so io.Copy goes through Write. Anything that
// is not a JSON body passes straight through, flushes and all. Unwrap gives ResponseController the
// underlying writer for deadlines; it finds Flush and Hijack here first.
type shapingWriter struct {
	w        http.ResponseWriter
	rt       *Router
	r        *http.Request
	buf      *bytes.Buffer
	status   int
	mode     int
	tooLarge bool
	verbatim bool // the handler's body is the same in every version (unshaped): pass it through
}

func (s *shapingWriter) Header() http.Header { return s.w.Header() }

func (s *shapingWriter) Unwrap() http.ResponseWriter { return s.w }

func (s *shapingWriter) WriteHeader(code int) {
	if s.mode != modeUndecided {
		return // superfluous, as net/http treats it
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		s.w.WriteHeader(code) // informational responses (103 Early Hints) go out at once
		return
	}
	s.status = code
	h := s.w.Header()
	// A signed body (range retrieval's X-SVC-Signature) goes out byte for byte: the signature covers
	// those bytes, and its signer rendered them for the licensee's version already (EventRenderer).
	signed := h.Get(webhook.HeaderSignature) != ""
	jsonBody := isJSON(h.Get("Content-Type")) && bodyAllowed(code) && !signed && !s.verbatim
	encoded := h.Get("Content-Encoding") != "" && h.Get("Content-Encoding") != "identity"
	switch {
	case jsonBody && s.r.Method != http.MethodHead && !encoded:
		s.mode = modeBuffer
		return
	case jsonBody && encoded:
		s.rt.log.ErrorContext(s.r.Context(), "versioning: cannot shape a content-encoded JSON response; put compression outside the router",
			"path", apierror.Redact(s.r.URL.Path), "content_encoding", h.Get("Content-Encoding"))
	case jsonBody:
		// HEAD: the newest body's length is not the shaped body's.
		h.Del("Content-Length")
		dropValidators(h)
	}
	s.mode = modePass
	s.w.WriteHeader(code)
}

func bodyAllowed(code int) bool {
	return code >= 200 && code != http.StatusNoContent && code != http.StatusNotModified
}

func (s *shapingWriter) Write(p []byte) (int, error) {
	if s.mode == modeUndecided {
		s.WriteHeader(http.StatusOK)
	}
	switch s.mode {
	case modePass:
		return s.w.Write(p)
	case modeHijacked:
		return 0, http.ErrHijacked
	}
	if s.tooLarge {
		return 0, ErrResponseTooLarge
	}
	if s.rt.maxResp >= 0 && int64(s.buf.Len())+int64(len(p)) > s.rt.maxResp {
		s.tooLarge = true
		return 0, ErrResponseTooLarge
	}
	return s.buf.Write(p)
}

// Flush implements http.Flusher.
func (s *shapingWriter) Flush() { _ = s.FlushError() }

// FlushError is what http.ResponseController.Flush calls.
func (s *shapingWriter) FlushError() error {
	if s.mode == modeUndecided {
		s.WriteHeader(http.StatusOK)
	}
	if s.mode != modePass {
		return nil // the shaped body is written whole when the handler returns
	}
	return http.NewResponseController(s.w).Flush()
}

// Hijack implements http.Hijacker: allowed before anything is written, or for bodies that pass
// through; refused while a body is being captured, whose bytes would otherwise be lost.
func (s *shapingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if s.mode == modeBuffer {
		return nil, nil, ErrHijackWhileShaping
	}
	c, rw, err := http.NewResponseController(s.w).Hijack()
	if err == nil {
		s.mode = modeHijacked
	}
	return c, rw, err
}

// finish writes the captured body, shaped for version i.
func (s *shapingWriter) finish(i int, saved http.Header) {
	if s.mode != modeBuffer {
		return
	}
	ctx := s.r.Context()
	name := s.rt.reg.versions[i].Name
	if s.tooLarge {
		s.rt.log.ErrorContext(ctx, "versioning: response too large to shape", "version", name,
			"path", apierror.Redact(s.r.URL.Path), "limit", s.rt.maxResp)
		s.fail(saved)
		return
	}
	body := s.buf.Bytes()
	out, err := s.rt.reg.transformResponse(body, i)
	switch {
	case errors.Is(err, errNotJSON):
		// Nothing can parse it in any version; sending it as it is loses nothing.
		s.rt.log.WarnContext(ctx, "versioning: handler wrote a JSON content type with a body that is not JSON",
			"version", name, "path", apierror.Redact(s.r.URL.Path))
		out = body
	case err != nil:
		s.rt.log.ErrorContext(ctx, "versioning: response transform failed", "version", name,
			"path", apierror.Redact(s.r.URL.Path), "error", apierror.Redact(err.Error()))
		s.fail(saved)
		return
	}
	h := s.w.Header()
	h["Content-Length"] = []string{strconv.Itoa(len(out))}
	dropValidators(h)
	s.w.WriteHeader(s.status)
	_, _ = s.w.Write(out)
}

// fail answers 500 with only the headers the response had before the handler ran: the handler's
// Location or ETag describe a body the client will not get.
func (s *shapingWriter) fail(saved http.Header) {
	h := s.w.Header()
	clear(h)
	for k, v := range saved {
		h[k] = v
	}
	s.rt.writer.Write(s.w, s.r, apierror.Internal())
}

// dropValidators removes headers computed over the newest body, which the shaped body no longer
// matches.
func dropValidators(h http.Header) {
	for _, k := range [...]string{"Etag", "Content-Md5", "Digest", "Content-Digest", "Repr-Digest"} {
		delete(h, k)
	}
}
