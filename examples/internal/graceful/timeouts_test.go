package graceful

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNewServerTimeouts(t *testing.T) {
	hs := NewServer(http.NotFoundHandler(), Timeouts{}, nil)
	require.Equal(t, 5*time.Second, hs.ReadHeaderTimeout)
	require.Equal(t, 30*time.Second, hs.ReadTimeout)
	require.Equal(t, 60*time.Second, hs.WriteTimeout)
	require.Equal(t, 120*time.Second, hs.IdleTimeout)
	require.Equal(t, 64<<10, hs.MaxHeaderBytes)

	hs = NewServer(http.NotFoundHandler(), Timeouts{Read: time.Second}, nil)
	require.Equal(t, time.Second, hs.ReadTimeout)
	require.Equal(t, 5*time.Second, hs.ReadHeaderTimeout, "the others keep their defaults")
}

// serve starts a server with the timeouts t on a free loopback port.
func serve(t *testing.T, h http.Handler, to Timeouts) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := NewServer(h, to, nil)
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close(); <-done })
	return ln.Addr().String()
}

// closedByServer reads from c until the server closes it or answers, within a generous bound: it
// asserts that the server let go, not how fast.
func closedByServer(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Second)))
	_, err := io.ReadAll(c)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server still holds the connection")
}

// A client that drips its body, or its headers, is cut off; without the timeouts it would hold the
// connection as long as it liked.
func TestSlowClientsAreCutOff(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "body not received in time", http.StatusRequestTimeout)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	addr := serve(t, h, Timeouts{ReadHeader: 300 * time.Millisecond, Read: 300 * time.Millisecond})

	t.Run("dripping body", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
		require.NoError(t, err)
		closedByServer(t, c)
	})
	t.Run("dripping headers", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n")
		require.NoError(t, err)
		closedByServer(t, c)
	})
}

// Headers over MaxHeaderBytes are refused with 431 by net/http, before any handler runs.
func TestLargeHeadersAre431(t *testing.T) {
	addr := serve(t, http.NotFoundHandler(), Timeouts{})
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 80<<10)+"\r\n\r\n")
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
}
