package idempotency

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/internal/fields"
)

// ErrRecordRefused: with Options.Sealer set, the key's stored record is not sealed as a whole, or
// does not open — it was written or changed by someone without the key ring (a writer of the
// database), sealed by an older version that sealed the body only, or sealed with a key that has left
// the ring. Its request was carried out once, so it is neither replayed nor run again: the middleware
// answers the opaque 500 (no detail) and leaves the record in place for an operator, until its
// retention ends. Begin returns an error wrapping it.
var ErrRecordRefused = errors.New("idempotency: stored record refused: not sealed, or does not open, under Options.Sealer")

// headerSealed marks a stored record that is sealed (Options.Sealer). It is stored with the record's
// headers, never replayed, and never taken from a handler (Options.ReplayHeaders skips it). Its value
// is the format: sealedWhole ("v2") seals status, headers and body together; "v1", written by earlier
// versions, sealed the body alone and is refused under a Sealer, since its status and headers were
// not authenticated.
const headerSealed = "Idempotent-Sealed-Body"

// sealedWhole is the value of headerSealed on a record whose status, headers and body are sealed as
// one: such a record's stored header holds the mark alone and its body is the sealed envelope.
const sealedWhole = "v2"

// sealedMark is headerSealed's value, and sealedFields a sealed record's header fields; stores copy
// what they are given, so one of each serves all.
var (
	sealedMark   = []string{sealedWhole}
	sealedFields = []fields.Field{{Name: headerSealed, Vals: sealedMark}}
)

// sealContext starts the associated data of a sealed record: it keeps a record's seal apart from
// anything else the same key ring seals (webhook endpoint secrets, say).
const sealContext = "svc idempotency record v2\x00"

// sealAAD binds a sealed record to its place: a record moved to another scope or key does not open.
// An Idempotency-Key is visible ASCII, never NUL, so the last NUL ends the scope unambiguously.
func sealAAD(dst []byte, key driver.Key) []byte {
	dst = append(dst, sealContext...)
	dst = append(dst, key.Scope...)
	dst = append(dst, 0)
	return append(dst, key.Key...)
}

// aadBufSize is the stack buffer for sealAAD: a context, a typical scope and the longest key.
const aadBufSize = len(sealContext) + 64 + 1 + 255 + 32

// appendEnvelope appends the plaintext of a sealed record: the status, the header fields and the
// body, each length-prefixed (uvarint) except the body, which runs to the end.
func appendEnvelope(dst []byte, status int, fs []fields.Field, body []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(status))
	return append(fields.Append(dst, fs), body...)
}

var errEnvelope = errors.New("idempotency: sealed record is malformed")

// parseEnvelope reads appendEnvelope's output; the response's body aliases b.
func parseEnvelope(b []byte) (Response, error) {
	var resp Response
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	str := func() (string, bool) {
		n, ok := next()
		if !ok || n > uint64(len(b)) {
			return "", false
		}
		s := string(b[:n])
		b = b[n:]
		return s, true
	}
	status, ok := next()
	if !ok || status < 100 || status > 999 {
		return resp, errEnvelope
	}
	nf, ok := next()
	// Every field takes at least two bytes: a bound before allocating.
	if !ok || nf > uint64(len(b))/2 {
		return resp, errEnvelope
	}
	resp.Status, resp.Header = int(status), make(http.Header, nf)
	for range nf {
		name, ok := str()
		if !ok {
			return resp, errEnvelope
		}
		nv, ok := next()
		if !ok || nv > uint64(len(b)) {
			return resp, errEnvelope
		}
		vals := make([]string, 0, nv)
		for range nv {
			v, ok := str()
			if !ok {
				return resp, errEnvelope
			}
			vals = append(vals, v)
		}
		resp.Header[name] = vals
	}
	if len(b) > 0 {
		resp.Body = b
	}
	return resp, nil
}

// headerFields lists h as fields, for appendEnvelope.
func headerFields(h http.Header) []fields.Field {
	fs := make([]fields.Field, 0, len(h))
	for k, vs := range h {
		fs = append(fs, fields.Field{Name: k, Vals: vs})
	}
	return fs
}

// seal returns resp sealed as a whole: the stored header holds the mark alone, and the body is the
// sealed envelope of status, headers and body. resp is not changed.
func (m *Middleware) seal(key driver.Key, resp Response) Response {
	var aad [aadBufSize]byte
	plain := appendEnvelope(nil, resp.Status, headerFields(resp.Header), resp.Body)
	return Response{
		Status: resp.Status,
		Header: http.Header{headerSealed: sealedMark},
		Body:   m.sealer.Seal(nil, plain, sealAAD(aad[:0], key)),
	}
}

// unseal returns the replayable form of a stored response.
//
// With a Sealer, only a record sealed as a whole is replayed, from what the seal holds; anything else
// — no mark, the body-only format of earlier versions, headers beside the mark, a status that differs
// from the sealed one, a seal that does not open — is an error wrapping ErrRecordRefused: a writer of
// the store must not be able to choose what a client is answered, and the request, carried out once,
// must not run again.
//
// Without a Sealer, an unsealed record is replayed as it is, and a sealed one without its body and
// its sealed headers (HeaderBodyOmitted), with the stored status: there is no key to open it.
func (m *Middleware) unseal(ctx context.Context, key driver.Key, resp *Response) (*Response, error) {
	mark, sealed := resp.Header[headerSealed]
	if m.sealer == nil {
		if !sealed {
			return resp, nil
		}
		m.log.LogAttrs(ctx, slog.LevelError, "idempotency: stored record is sealed but Options.Sealer is not set; replaying without its body",
			slog.String("idempotency_key", key.Key))
		return omitBody(&Response{Status: resp.Status, Header: resp.Header}), nil
	}
	var why string
	switch {
	case !sealed:
		why = "not sealed"
	case len(mark) != 1 || mark[0] != sealedWhole:
		why = "not sealed as a whole (an earlier format, or an unknown one)"
	case len(resp.Header) != 1:
		why = "headers stored outside the seal"
	}
	if why != "" {
		return nil, fmt.Errorf("%w: %s", ErrRecordRefused, why)
	}
	var aad [aadBufSize]byte
	plain, err := m.sealer.Open(nil, resp.Body, sealAAD(aad[:0], key))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRecordRefused, err)
	}
	out, err := parseEnvelope(plain)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRecordRefused, err)
	}
	if out.Status != resp.Status {
		return nil, fmt.Errorf("%w: stored status %d differs from the sealed one", ErrRecordRefused, resp.Status)
	}
	return &out, nil
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
