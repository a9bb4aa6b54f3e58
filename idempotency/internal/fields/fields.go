// Package fields is what package idempotency and package memstore share and neither exports: the
// form in which the middleware captures a response's headers and the memory store keeps them — a
// slice of fields, so that neither has to build (or iterate) a map per request — and the memory
// store's completion from that form, which the middleware calls for a *memstore.Store.
package fields

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/svcplatform/conventions/idempotency/driver"
)

// Field is one response header: its canonical name and its values.
type Field struct {
	Name string
	Vals []string
}

// Append appends the count of fs, then each field's name and values, each length-prefixed
// (uvarint): the header part of the memory store's record and of a sealed envelope.
func Append(dst []byte, fs []Field) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(fs)))
	for _, f := range fs {
		dst = binary.AppendUvarint(dst, uint64(len(f.Name)))
		dst = append(dst, f.Name...)
		dst = binary.AppendUvarint(dst, uint64(len(f.Vals)))
		for _, v := range f.Vals {
			dst = binary.AppendUvarint(dst, uint64(len(v)))
			dst = append(dst, v...)
		}
	}
	return dst
}

// CompleteMemory is Complete of the *memstore.Store store on header fields: the middleware's path,
// which never builds a header map for a response that may never be replayed. Package memstore sets
// it when it is initialized; package idempotency, which imports memstore, calls it with a
// *memstore.Store only.
var CompleteMemory func(ctx context.Context, store any, key driver.Key, token uint64, status int, fs []Field, body []byte, expiresAt time.Time) error
