package seal_test

import (
	"strings"
	"testing"

	"github.com/svcplatform/conventions/seal"
)

// The sealing benchmarks use a 256-byte body, typical of a JSON response carrying a secret, and the
// longest aad the middleware builds (a 64-byte scope, a separator and a 255-byte key), so that the
// pooled additional-data buffer is exercised at its realistic worst. "Room" variants reuse a buffer
// as a store adapter can; "Nil" variants let Seal or Open allocate the result.

var sealBenchAAD = []byte(strings.Repeat("s", 64) + "\x00" + strings.Repeat("k", 255))

func newSealBench(b *testing.B) (s *seal.Ring, body, sealed []byte) {
	s = newTestRing(b, sealTestKey(2), sealTestKey(1))
	body = make([]byte, 256)
	for i := range body {
		body[i] = byte(i)
	}
	return s, body, s.Seal(nil, body, sealBenchAAD)
}

func BenchmarkSeal256(b *testing.B) {
	s, body, _ := newSealBench(b)
	b.Run("Room", func(b *testing.B) {
		buf := make([]byte, 0, len(body)+seal.Overhead)
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			buf = s.Seal(buf[:0], body, sealBenchAAD)
		}
	})
	b.Run("Nil", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			_ = s.Seal(nil, body, sealBenchAAD)
		}
	})
	b.Run("Parallel", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			buf := make([]byte, 0, len(body)+seal.Overhead)
			for pb.Next() {
				buf = s.Seal(buf[:0], body, sealBenchAAD)
			}
		})
	})
}

func BenchmarkOpen256(b *testing.B) {
	s, body, sealed := newSealBench(b)
	b.Run("Room", func(b *testing.B) {
		buf := make([]byte, 0, len(body))
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			var err error
			if buf, err = s.Open(buf[:0], sealed, sealBenchAAD); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Nil", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Open(nil, sealed, sealBenchAAD); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Parallel", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			buf := make([]byte, 0, len(body))
			for pb.Next() {
				var err error
				if buf, err = s.Open(buf[:0], sealed, sealBenchAAD); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
