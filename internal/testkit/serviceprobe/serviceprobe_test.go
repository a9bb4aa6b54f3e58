package serviceprobe

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// closedPort returns a loopback address nothing listens on: a port the kernel handed out and that was
// closed again.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// fakeServer accepts connections on a loopback port and hands each to serve; it counts the
// connections and stops when the test ends.
func fakeServer(t *testing.T, serve func(net.Conn)) (addr string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted = new(atomic.Int32)
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			wg.Go(func() {
				defer conn.Close()
				serve(conn)
			})
		}
	})
	return ln.Addr().String(), accepted
}

// reply reads what the client sends (up to n bytes) and answers with answer.
func reply(n int, answer string) func(net.Conn) {
	return func(conn net.Conn) {
		buf := make([]byte, n)
		if _, err := io.ReadFull(conn, buf); err != nil {
			return
		}
		_, _ = io.WriteString(conn, answer)
	}
}

// silent accepts and never answers, until the client hangs up.
func silent(conn net.Conn) { _, _ = io.Copy(io.Discard, conn) }

func TestDial(t *testing.T) {
	tests := []struct {
		name  string
		serve func(net.Conn) // nil: nothing listens
		probe Probe
		ok    bool
	}{
		{"closed port", nil, Redis, false},
		{"closed port, dial only", nil, nil, false},
		{"Redis PONG", reply(6, "+PONG\r\n"), Redis, true},
		{"Redis that wants a password", reply(6, "-NOAUTH Authentication required.\r\n"), Redis, true},
		{"not Redis", reply(6, "HTTP/1.1 400 Bad Request\r\n"), Redis, false},
		{"Redis port that never answers", silent, Redis, false},
		{"PostgreSQL without TLS", reply(8, "N"), Postgres, true},
		{"PostgreSQL with TLS", reply(8, "S"), Postgres, true},
		{"not PostgreSQL", reply(8, "E"), Postgres, false},
		{"PostgreSQL port that never answers", silent, Postgres, false},
		{"listening, dial only", silent, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := closedPort(t)
			if tc.serve != nil {
				addr, _ = fakeServer(t, tc.serve)
			}
			// The deadline is short so that the silent servers cost little; what is asserted is the
			// verdict, not how long it took.
			err := Dial(context.Background(), "tcp", addr, tc.probe, 200*time.Millisecond)
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
		})
	}
}

func TestCheckNamesTheVariableAndAddress(t *testing.T) {
	addr := closedPort(t)
	target := Target{Env: "SVC_TEST_REDIS_URL", Value: "redis://:hunter2@" + addr + "/0", Server: "Redis",
		Network: "tcp", Addr: addr, Probe: Redis}
	err := Check(target)
	require.Error(t, err)
	msg := err.Error()
	require.True(t, strings.HasPrefix(msg, "SVC_TEST_REDIS_URL=redis://:xxxxx@"+addr+"/0 is set but nothing answers at "+addr+
		": start Redis or unset the variable ("), msg)
	require.NotContains(t, msg, "hunter2")
}

func TestCheckProbesOncePerTarget(t *testing.T) {
	addr, accepted := fakeServer(t, reply(6, "+PONG\r\n"))
	target := Target{Env: "SVC_TEST_REDIS_URL", Value: "redis://" + addr, Server: "Redis", Network: "tcp", Addr: addr, Probe: Redis}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { require.NoError(t, Check(target)) })
	}
	wg.Wait()
	require.EqualValues(t, 1, accepted.Load(), "one probe for ten checks")

	other := target
	other.Value += "/1"
	require.NoError(t, Check(other))
	require.EqualValues(t, 2, accepted.Load(), "another value is another target")

	// A dead target's verdict is kept as well: every test after the first fails at once.
	dead := closedPort(t)
	gone := Target{Env: "SVC_TEST_POSTGRES_DSN", Value: "postgres://" + dead, Server: "PostgreSQL", Network: "tcp", Addr: dead, Probe: Postgres}
	first := Check(gone)
	require.Error(t, first)
	require.Same(t, first, Check(gone))
}

func TestCheckSilentServer(t *testing.T) {
	addr, _ := fakeServer(t, silent)
	err := check(Target{Env: "SVC_TEST_POSTGRES_DSN", Value: "host=127.0.0.1", Server: "PostgreSQL", Network: "tcp",
		Addr: addr, Probe: Postgres}, 100*time.Millisecond)
	require.ErrorContains(t, err, "no answer within 100ms")
}

func TestPostgresAddr(t *testing.T) {
	n, a := PostgresAddr("127.0.0.1", 5432)
	require.Equal(t, [2]string{"tcp", "127.0.0.1:5432"}, [2]string{n, a})
	n, a = PostgresAddr("::1", 5433)
	require.Equal(t, [2]string{"tcp", "[::1]:5433"}, [2]string{n, a})
	n, a = PostgresAddr("/var/run/postgresql", 5432)
	require.Equal(t, [2]string{"unix", "/var/run/postgresql/.s.PGSQL.5432"}, [2]string{n, a})
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://:secret@127.0.0.1:6379/0", "redis://:xxxxx@127.0.0.1:6379/0"},
		{"postgres://app:secret@db:5432/test?sslmode=disable", "postgres://app:xxxxx@db:5432/test?sslmode=disable"},
		{"postgres://app@db/test?password=secret", "postgres://app@db/test?password=xxxxx"},
		{"host=db user=app password=secret dbname=test", "host=db user=app password=xxxxx dbname=test"},
		{"host=db password='a b\\' c' dbname=test", "host=db password=xxxxx dbname=test"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			require.Equal(t, tc.want, Redact(tc.in))
		})
	}
}
