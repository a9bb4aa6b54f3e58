package apierror

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"

	"github.com/svcplatform/conventions/internal/randid"
	"github.com/svcplatform/conventions/internal/reqnote"
)

// DefaultTypeBase prefixes a problem's code to form its type URI when the problem has no Type.
const DefaultTypeBase = "https://svcplatform.dev/problems/"

// HeaderRequestID is the header that carries the request ID in both directions.
const HeaderRequestID = "X-Request-Id"

// Writer renders errors as problem responses. A service makes one, with its own type base and logger,
// and hands it to everything that writes problems: the Problems field of every Options in this library
// (idempotency, webhook, webhook/producer, versioning, sandbox), or, once for the whole service, its
// Handler middleware, which every Writer left zero defers to.
//
// The zero value is ready to use: each field left empty is taken from the Writer that Handler put in
// the request's context, and without one it derives type URIs from DefaultTypeBase and logs nothing.
// A Writer is safe for concurrent use.
type Writer struct {
	// TypeBase prefixes a problem's code to form its type URI; empty means DefaultTypeBase.
	TypeBase string
	// Logger, when set, records every error that became an opaque 5xx, with its request ID.
	Logger *slog.Logger
	// Hooks, when set, are told about every problem written (its status and code); nil means the
	// ones of the Writer in the request context, and without them nothing is told, at no cost.
	Hooks *Hooks
}

// Write writes err to w as an application/problem+json response. An *Error anywhere in err's chain is
// written as it is (with the request ID filled in); anything else, and an *Error whose Status is not a
// 4xx or 5xx, becomes the opaque 500, and the original error is logged, never sent.
func Write(w http.ResponseWriter, r *http.Request, err error) { Writer{}.Write(w, r, err) }

// Write is the package-level Write with this Writer's settings. A field left empty is taken from the
// Writer that Handler put in the request's context, when there is one.
func (wr Writer) Write(w http.ResponseWriter, r *http.Request, err error) {
	if (wr.TypeBase == "" || wr.Logger == nil || wr.Hooks == nil) && r != nil {
		wr = wr.withDefaults(r.Context())
	}
	p, _ := err.(*Error) // the common case, checked first so that no pointer escapes for errors.As
	if p == nil {
		p = asError(err)
	}
	// Found once, so that the log line, the header and the body all carry the same ID.
	reqID := requestID(w, r)
	opaque := p == nil || p.Status < 400 || p.Status > 599
	if opaque {
		// Not a problem, or one without an error status (0 would make WriteHeader panic): a programming
		// error, answered with the opaque 500.
		p = Internal()
		if wr.Logger != nil {
			ctx := context.Background()
			if r != nil {
				ctx = r.Context()
			}
			// The error's text may quote what the client sent: redacted like a problem's detail.
			msg := "<nil>"
			if err != nil {
				msg = Redact(err.Error())
			}
			wr.Logger.ErrorContext(ctx, "apierror: internal error", "request_id", reqID,
				"client_request_id", ClientRequestIDFromContext(ctx), "error", msg)
		}
	}
	// The problem is never copied or mutated: the caller may reuse it (a package-level value, say).
	base := wr.TypeBase
	if base == "" {
		base = DefaultTypeBase
	}
	buf := bufPool.Get().(*[]byte)
	defer putBuf(buf)
	status, headers := p.Status, p.Headers
	body, mErr := p.appendJSON((*buf)[:0], base, reqID)
	if mErr != nil {
		// An extension that cannot be marshalled is a programming error; still answer with a problem.
		p, opaque = Internal(), true
		body, _ = p.appendJSON(body[:0], base, reqID)
		status, headers = p.Status, nil
	}
	*buf = body
	h := w.Header()
	for k, vs := range headers {
		h[k] = vs
	}
	// One allocation for the header values; each slice is capped so an Add cannot overwrite a
	// neighbour. WithRequestID has usually set X-Request-Id already, and then it is left as it is.
	if cur := h[HeaderRequestID]; len(cur) == 1 && cur[0] == reqID {
		vals := [...]string{MediaType, "nosniff"}
		h["Content-Type"], h["X-Content-Type-Options"] = vals[0:1:1], vals[1:2:2]
	} else {
		vals := [...]string{MediaType, "nosniff", reqID}
		h["Content-Type"], h["X-Content-Type-Options"], h[HeaderRequestID] = vals[0:1:1], vals[1:2:2], vals[2:3:3]
	}
	delete(h, "Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(body)
	if r != nil {
		reqnote.From(r.Context()).SetCode(p.Code)
	}
	if wr.Hooks != nil {
		ctx := context.Background()
		if r != nil {
			ctx = r.Context()
		}
		wr.Hooks.problemWritten(ctx, WrittenProblem{Status: status, Code: p.Code, Type: p.Type, Violations: len(p.Errors), Opaque: opaque})
	}
}

// asError finds an *Error in err's chain; it is apart from Write so that its pointer's escape costs
// only the callers that wrap.
func asError(err error) *Error {
	var p *Error
	if errors.As(err, &p) {
		return p
	}
	return nil
}

// bufPool recycles body buffers; bodies over 64 KiB are not kept, so one huge problem cannot pin memory.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func putBuf(b *[]byte) {
	if cap(*b) <= 64<<10 {
		bufPool.Put(b)
	}
}

type requestIDKey struct{}

// RequestIDFromContext returns the request ID that WithRequestID stored in ctx, or "".
func RequestIDFromContext(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// NewRequestIDContext returns a copy of ctx that carries id as the request ID.
func NewRequestIDContext(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// newRequestID returns a fresh request ID: "req_" and 26 random characters.
func newRequestID() string { return randid.New("req_") }

// validRequestID reports whether a client-sent X-Request-Id is worth keeping for the server's logs:
// 1 to 128 bytes of letters, digits, '-', '_', '.', ':' and '/', and not shaped like a credential
// (LooksLikeCredential). It is never echoed either way: see WithRequestID.
func validRequestID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':' || c == '/') {
			return false
		}
	}
	return !LooksLikeCredential(id)
}

type clientRequestIDKey struct{}

// ClientRequestIDFromContext returns the X-Request-Id the client sent, when WithRequestID found it
// well-formed (see RequestIDs.From), or "". It is for the server's own logs, to join them with the
// client's: it is never sent back.
func ClientRequestIDFromContext(ctx context.Context) string {
	id, _ := ctx.Value(clientRequestIDKey{}).(string)
	return id
}

// WithRequestID is middleware that gives every request an ID of the server's own, "req_" and 26
// random characters: it is in the request context (RequestIDFromContext), on the response's
// X-Request-Id header, and in every problem body Write renders. It is RequestIDs{}.Handler.
//
// A client's X-Request-Id is never taken over or echoed. Echoing it would reflect whatever the client
// put there — a client that sent its live API key as the header would see the key repeated in the
// response and in every log, proxy and error tracker on the way. When it is well-formed and not
// shaped like a credential it is kept for the server's logs (ClientRequestIDFromContext); the
// client correlates by the ID it gets back.
func WithRequestID(next http.Handler) http.Handler { return RequestIDs{}.Handler(next) }

// RequestIDs is the request-ID middleware with its one option. The zero value is WithRequestID. It is
// safe for concurrent use.
type RequestIDs struct {
	// From, when set, adopts the ID that a layer in front of this one already gave the request, so
	// that one request has one ID in every log line, header and problem body instead of two. With
	// chi, whose middleware.RequestID runs first:
	//
	//	r.Use(middleware.RequestID, apierror.RequestIDs{From: func(r *http.Request) string {
	//		return middleware.GetReqID(r.Context())
	//	}}.Handler)
	//
	// An ID From returns is echoed on X-Request-Id and in problem bodies, so it is adopted only when it
	// is well-formed — 1 to 128 bytes of letters, digits and -_.:/, not shaped like a credential;
	// anything else, "" included, gets an ID of the server's own. Upstream sources often take the
	// client's X-Request-Id as it came (chi's does): this check is what keeps a key pasted there from
	// coming back.
	From func(r *http.Request) string
}

// Handler implements the middleware: see WithRequestID and From.
func (ri RequestIDs) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var id string
		if ri.From != nil {
			if up := ri.From(r); validRequestID(up) {
				id = up
			}
		}
		if id == "" {
			id = newRequestID()
		}
		w.Header().Set(HeaderRequestID, id)
		ctx := NewRequestIDContext(r.Context(), id)
		if sent := r.Header.Get(HeaderRequestID); sent != "" && validRequestID(sent) {
			ctx = context.WithValue(ctx, clientRequestIDKey{}, sent)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// requestID finds the ID of this request: from the context, then from a header WithRequestID set,
// and otherwise a fresh one, so that a problem always carries one.
func requestID(w http.ResponseWriter, r *http.Request) string {
	if r != nil {
		if id := RequestIDFromContext(r.Context()); id != "" {
			return id
		}
	}
	if id := w.Header().Get(HeaderRequestID); id != "" {
		return id
	}
	return newRequestID()
}

type writerKey struct{}

// Handler is middleware that makes wr the Writer of every problem written for the requests through
// next, by this library's packages and by the package-level Write and WriteJSON: wherever a Writer
// leaves TypeBase, Logger or Hooks empty, wr's is used. This is the one place a service sets its
// problem type base, logger and hooks; a field given explicitly (an Options.Problems with its own
// TypeBase) still wins.
//
//	problems := apierror.Writer{TypeBase: "https://payments.example/problems/", Logger: log}
//	srv := &http.Server{Handler: apierror.WithRequestID(problems.Handler(problems.ServeMux(mux)))}
func (wr Writer) Handler(next http.Handler) http.Handler {
	cw := &wr
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), writerKey{}, cw)))
	})
}

// withDefaults fills wr's empty fields from the Writer Handler put in ctx.
func (wr Writer) withDefaults(ctx context.Context) Writer {
	if cw, ok := ctx.Value(writerKey{}).(*Writer); ok {
		if wr.TypeBase == "" {
			wr.TypeBase = cw.TypeBase
		}
		if wr.Logger == nil {
			wr.Logger = cw.Logger
		}
		if wr.Hooks == nil {
			wr.Hooks = cw.Hooks
		}
	}
	return wr
}
