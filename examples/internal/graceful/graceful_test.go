package graceful

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A connection that never sends a request must not hold the shutdown for net/http's five seconds,
// while a request that has started is still answered in full.
func TestShutdownDoesNotWaitOnSilentConnections(t *testing.T) {
	started := make(chan struct{})
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		time.Sleep(600 * time.Millisecond) // longer than the grace: a started request is waited for
		_, _ = io.WriteString(w, "done")
	})}
	conns := Track(hs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	silent, err := net.Dial("tcp", ln.Addr().String()) // what an unused pooled connection looks like
	require.NoError(t, err)
	defer silent.Close()

	type answer struct {
		body string
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		answered <- answer{string(b), err}
	}()
	<-started

	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, Shutdown(ctx, hs, conns))
	took := time.Since(begin)
	require.Less(t, took, 3*time.Second, "the silent connection held the shutdown")

	a := <-answered
	require.NoError(t, a.err)
	require.Equal(t, "done", a.body, "the request in flight finished")
	require.ErrorIs(t, <-served, http.ErrServerClosed)
	_ = silent.SetReadDeadline(time.Now().Add(time.Second))
	_, err = silent.Read(make([]byte, 1))
	require.Error(t, err, "the silent connection was closed")
}
