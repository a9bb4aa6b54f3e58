package memstore

import (
	"encoding/binary"
	"net/http"
	"time"

	"github.com/svcplatform/conventions/idempotency/driver"
	"github.com/svcplatform/conventions/idempotency/internal/fields"
)

// memRecord is one record. It is kept light for the garbage collector, which otherwise spends more
// on a large store than the store spends on its requests: times are Unix nanoseconds, and a stored
// response is one pointer-free blob (encoded header, then body) until it is first read.
type memRecord struct {
	key        driver.Key
	hash       uint64
	next       *memRecord  // hash collision chain
	stored     bool        // in the shard's index (false once dropped)
	requeue    bool        // expiresAt moved later since the record was queued
	suspect    bool        // a claim found the lease lapsed and extended it once (see Store.Claim)
	quota      *scopeCount // the scope's count, when quotas are on
	hasHeader  bool        // the response had a (possibly empty) header
	status     driver.Status
	fp         driver.Fingerprint
	token      uint64
	leaseUntil int64  // Unix ns
	expiresAt  int64  // Unix ns
	code       int    // the response's status code
	blob       []byte // encoded header fields, then the body
	hdrLen     int    // length of the header part of blob
	resp       *driver.Response
	size       int64
}

// response returns the stored response, decoding it on first use; it is never changed afterwards,
// so callers may share it. The shard's lock is held.
func (r *memRecord) response() *driver.Response {
	if r.resp == nil {
		resp := &driver.Response{Status: r.code}
		if r.hasHeader {
			resp.Header = decodeFields(r.blob[:r.hdrLen])
		}
		if len(r.blob) > r.hdrLen {
			resp.Body = r.blob[r.hdrLen:len(r.blob):len(r.blob)]
		}
		r.resp = resp
	}
	return r.resp
}

func (r *memRecord) setExpiry(ns int64) {
	if ns > r.expiresAt {
		r.requeue = true
	}
	r.expiresAt = ns
}

func unixTime(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// encodeResponse encodes header fields and body into one pointer-free buffer: the fields as
// fields.Append writes them (for each its name and values, each length-prefixed), then the body. It
// returns the buffer and the length of its header part.
func encodeResponse(fs []fields.Field, body []byte) ([]byte, int) {
	n := binary.MaxVarintLen64 // the field count
	for _, f := range fs {
		n += 2*binary.MaxVarintLen64 + len(f.Name)
		for _, v := range f.Vals {
			n += binary.MaxVarintLen64 + len(v)
		}
	}
	b := make([]byte, 0, n+len(body))
	if fs != nil {
		b = fields.Append(b, fs)
	}
	hdrLen := len(b)
	return append(b, body...), hdrLen
}

// decodeFields rebuilds the header encodeResponse encoded: one string holds every name and value,
// one array every value slice. Each value slice is capped, so that an append by a reader can never
// write into a neighbour.
func decodeFields(b []byte) http.Header {
	if len(b) == 0 {
		return http.Header{}
	}
	s := string(b)
	i := 0
	next := func() int {
		v, n := binary.Uvarint(b[i:])
		i += n
		return int(v)
	}
	str := func() string {
		l := next()
		v := s[i : i+l]
		i += l
		return v
	}
	nf := next()
	h := make(http.Header, nf)
	var all []string
	for range nf {
		name := str()
		nv := next()
		if nv > len(all) {
			all = make([]string, max(nv, 4))
		}
		for j := range nv {
			all[j] = str()
		}
		h[name] = all[:nv:nv]
		all = all[nv:]
	}
	return h
}
