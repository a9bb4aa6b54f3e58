package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

func TestConcurrentWritesAndReads(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := len(b.String()); got != 800 {
		t.Fatalf("len = %d, want 800", got)
	}
	log, lb := Logger()
	log.Debug("hello", "k", "v")
	if !strings.Contains(lb.String(), `"msg":"hello"`) {
		t.Fatalf("logger wrote %q", lb.String())
	}
}
