// Package graceful shuts an http.Server down without waiting on connections that never sent a
// request.
//
// http.Server.Shutdown closes idle keep-alive connections at once, but it treats a connection that
// was accepted and has not sent a request yet (state New) as busy for up to five seconds. Go's own
// http.Transport opens such connections routinely: when a request it was dialling for is served by
// another connection that became free first, the new one goes to the pool unused. A server stopped
// just then would sit out those five seconds — long enough for an evaluator to think it hangs.
// Shutdown here closes them after a short grace instead; requests that have started are still
// waited for.
package graceful

import (
	"context"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// DefaultGrace is how long a connection may stay without its first request once the shutdown has
// begun before it is closed: far longer than a request's headers take to arrive on any real link
// after its connection opened, far shorter than net/http's five seconds.
const DefaultGrace = 250 * time.Millisecond

// Tracker records the connections of one http.Server that have not sent a request yet. Install it
// with Track before serving.
type Tracker struct {
	mu    sync.Mutex
	fresh map[net.Conn]time.Time // state New, and when they got there
}

// Track installs a Tracker on hs (chaining any ConnState hook already there) and returns it.
func Track(hs *http.Server) *Tracker {
	t := &Tracker{fresh: make(map[net.Conn]time.Time)}
	prev := hs.ConnState
	hs.ConnState = func(c net.Conn, s http.ConnState) {
		t.mu.Lock()
		if s == http.StateNew {
			t.fresh[c] = time.Now()
		} else {
			delete(t.fresh, c)
		}
		t.mu.Unlock()
		if prev != nil {
			prev(c, s)
		}
	}
	return t
}

// closeFresh closes the connections that have been waiting for their first request longer than
// grace, counting from no earlier than since.
func (t *Tracker) closeFresh(since time.Time, grace time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for c, at := range t.fresh {
		if time.Since(latest(at, since)) >= grace {
			_ = c.Close() // its serving goroutine sees the error and reports StateClosed
			delete(t.fresh, c)
		}
	}
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Shutdown is hs.Shutdown(ctx) that does not wait on connections without a request: each gets
// DefaultGrace from the start of the shutdown (or from its opening, if later) to send one, and is
// closed if it has not. t must have been installed on hs with Track.
func Shutdown(ctx context.Context, hs *http.Server, t *Tracker) error {
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- hs.Shutdown(ctx) }()
	tick := time.NewTicker(DefaultGrace / 5)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			t.closeFresh(start, DefaultGrace)
		}
	}
}

// Timeouts bound what one client can hold of a server: a connection that drips its headers or body,
// never reads its response, or idles between requests is closed, so a few slow or hostile clients
// cannot pin connections (and their goroutines and buffers) indefinitely. Zero fields take the
// defaults of DefaultTimeouts.
type Timeouts struct {
	// ReadHeader bounds reading a request's headers.
	ReadHeader time.Duration
	// Read bounds reading a whole request, body included: 1 MiB, the largest body the examples
	// accept, takes a second on a slow mobile link; thirty allow for far worse.
	Read time.Duration
	// Write bounds writing the response, from the end of the request's headers.
	Write time.Duration
	// Idle bounds a keep-alive connection's wait for its next request.
	Idle time.Duration
	// MaxHeaderBytes caps a request's headers; a larger one is answered 431 by net/http.
	MaxHeaderBytes int
}

// DefaultTimeouts are the example servers' limits.
var DefaultTimeouts = Timeouts{
	ReadHeader:     5 * time.Second,
	Read:           30 * time.Second,
	Write:          60 * time.Second,
	Idle:           120 * time.Second,
	MaxHeaderBytes: 64 << 10,
}

// withDefaults fills the zero fields of t from DefaultTimeouts.
func (t Timeouts) withDefaults() Timeouts {
	d := DefaultTimeouts
	if t.ReadHeader > 0 {
		d.ReadHeader = t.ReadHeader
	}
	if t.Read > 0 {
		d.Read = t.Read
	}
	if t.Write > 0 {
		d.Write = t.Write
	}
	if t.Idle > 0 {
		d.Idle = t.Idle
	}
	if t.MaxHeaderBytes > 0 {
		d.MaxHeaderBytes = t.MaxHeaderBytes
	}
	return d
}

// NewServer returns an http.Server for h with the timeouts t (zero fields: the defaults) and
// errorLog for net/http's own messages (nil: the standard logger).
func NewServer(h http.Handler, t Timeouts, errorLog *log.Logger) *http.Server {
	t = t.withDefaults()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    t.MaxHeaderBytes,
		ErrorLog:          errorLog,
	}
}
