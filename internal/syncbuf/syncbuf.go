// Package syncbuf is the buffer the library's tests hand to a logger or a command's output while
// they read it from another goroutine: a bytes.Buffer behind a mutex.
package syncbuf

import (
	"bytes"
	"log/slog"
	"sync"
)

// Buffer is an io.Writer safe for concurrent use whose String may be read at any time. The zero
// value is an empty buffer ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Logger returns a JSON logger at debug level that writes to a new Buffer, and the Buffer.
func Logger() (*slog.Logger, *Buffer) {
	b := new(Buffer)
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}
