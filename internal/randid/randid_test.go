package randid

import (
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := New("req_")
		if !strings.HasPrefix(id, "req_") || len(id) != 4+26 {
			t.Fatalf("malformed id %q", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
}

func TestUint63(t *testing.T) {
	seen := map[uint64]bool{}
	var or uint64
	for range 10000 {
		n := Uint63()
		if n == 0 || n >= 1<<63 {
			t.Fatalf("Uint63() = %d, out of [1, 2^63)", n)
		}
		if seen[n] {
			t.Fatalf("duplicate %d", n)
		}
		seen[n] = true
		or |= n
	}
	if or != 1<<63-1 {
		t.Fatalf("bits never set over 10,000 draws: %x", ^or&(1<<63-1))
	}
}
