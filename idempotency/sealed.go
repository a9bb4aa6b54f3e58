package idempotency

import (
	"context"
	"log/slog"
	"net/http"
)

// headerSealed marks a stored response whose body is sealed (Options.Sealer). It is stored with the
// record's headers, never replayed, and never taken from a handler (Options.ReplayHeaders skips it).
const headerSealed = "Idempotent-Sealed-Body"

// sealedMark is headerSealed's value; stores copy what they are given, so one slice serves all.
var sealedMark = []string{"v1"}

// sealAAD binds a sealed body to its record: a body moved to another scope or key does not open.
func sealAAD(dst []byte, key Key) []byte {
	dst = append(dst, key.Scope...)
	dst = append(dst, 0)
	return append(dst, key.Key...)
}

// seal returns resp with its body sealed and the mark among its headers; resp is not changed.
func (m *Middleware) seal(key Key, resp Response) Response {
	var buf [320]byte
	h := make(http.Header, len(resp.Header)+1)
	for k, vs := range resp.Header {
		h[k] = vs
	}
	h[headerSealed] = sealedMark
	return Response{Status: resp.Status, Header: h, Body: m.sealer.Seal(nil, resp.Body, sealAAD(buf[:0], key))}
}

// unseal returns the replayable form of a stored response: itself when it is not sealed, otherwise a
// copy with the body opened. The copy shares the stored header, mark included (writeReplay skips it).
// A body that does not open (its key left the ring, or the record was tampered with) is replayed
// without it, as a response over MaxResponseBytes is: the handler must not run again for a request
// that was carried out.
func (m *Middleware) unseal(ctx context.Context, key Key, resp *Response) *Response {
	if _, ok := resp.Header[headerSealed]; !ok {
		return resp
	}
	out := &Response{Status: resp.Status, Header: resp.Header}
	if m.sealer == nil {
		m.log.LogAttrs(ctx, slog.LevelError, "idempotency: stored body is sealed but Options.Sealer is not set; replaying without it",
			slog.String("idempotency_key", key.Key))
		return omitBody(out)
	}
	var aad [320]byte
	body, err := m.sealer.Open(nil, resp.Body, sealAAD(aad[:0], key))
	if err != nil {
		m.log.LogAttrs(ctx, slog.LevelError, "idempotency: stored body does not open; replaying without it",
			slog.String("idempotency_key", key.Key), slog.Any("error", err))
		return omitBody(out)
	}
	out.Body = body
	return out
}

// omitBody turns a replay into one without its body, marked as such; its header is a copy.
func omitBody(resp *Response) *Response {
	h := make(http.Header, len(resp.Header))
	for k, vs := range resp.Header {
		if k != "Content-Type" && k != headerSealed {
			h[k] = vs
		}
	}
	h[HeaderBodyOmitted] = []string{"true"}
	resp.Header, resp.Body = h, nil
	return resp
}
