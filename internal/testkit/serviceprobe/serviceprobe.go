// Package serviceprobe tells the test helpers of every module (pgstore's pgtest, redisstore's
// redistest, the examples' testenv, the benchmarks) whether the PostgreSQL or Redis that a test
// variable (SVC_TEST_POSTGRES_DSN, SVC_TEST_REDIS_URL) names is there, before any test spends its
// driver's dial timeouts and retries finding out. A variable set to a dead address then costs its
// test binary one short probe, and every test that needs the server fails at once with a message
// that names the variable and the address, instead of each one waiting out its driver (go-redis
// retried a closed port for about 1.5 s per test, 70 s for redisstore's tests).
//
// The probe speaks just enough of the protocol to know it reached the right kind of server: Redis
// answers an inline PING (an error reply such as NOAUTH counts: a server is there), PostgreSQL answers
// an SSLRequest with one byte. A port that accepts but never answers costs the probe's deadline
// (Timeout), once.
//
// It is part of this repository's shared test infrastructure, internal/testkit, published as a
// module of its own so that the nested modules' tests (pgstore, redisstore, examples, benchmarks)
// never import the root module's internal/: that would tie each of them to one commit of the root.
package serviceprobe

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// Timeout bounds one probe, dial and answer together. It costs nothing when nothing listens (the dial
// is refused at once) and is spent only on an address that drops packets or a port that accepts and
// stays silent. A server on the same machine answers in well under a millisecond; the margin is for a
// machine so busy that the server waits for a core, since one failed probe fails the whole test
// binary: it is the deadline the helpers' own per-test PING has, so the probe fails nowhere that PING
// would have passed.
const Timeout = 5 * time.Second

// Probe speaks to a freshly dialled connection and returns nil when the right kind of server answered.
// The connection's deadline is already set; the probe does not close it. Redis and Postgres are safe
// for concurrent use: each call speaks only to its own connection.
type Probe func(conn net.Conn) error

// Redis sends an inline PING and accepts any RESP reply: "+PONG", or an error reply such as
// "-NOAUTH" or "-LOADING", which still comes from a Redis server.
func Redis(conn net.Conn) error {
	if _, err := io.WriteString(conn, "PING\r\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("no reply to PING: %w", err)
	}
	if line[0] != '+' && line[0] != '-' {
		return fmt.Errorf("the reply to PING is not Redis's: %q", line)
	}
	return nil
}

// sslRequestCode is the protocol code of PostgreSQL's SSLRequest (1234 << 16 | 5679).
const sslRequestCode = 80877103

// Postgres sends an SSLRequest, the one message every PostgreSQL server answers before any
// authentication, with a single byte: 'S' (TLS offered) or 'N' (not).
func Postgres(conn net.Conn) error {
	var msg [8]byte
	binary.BigEndian.PutUint32(msg[0:4], 8)
	binary.BigEndian.PutUint32(msg[4:8], sslRequestCode)
	if _, err := conn.Write(msg[:]); err != nil {
		return err
	}
	var reply [1]byte
	if _, err := io.ReadFull(conn, reply[:]); err != nil {
		return fmt.Errorf("no reply to an SSLRequest: %w", err)
	}
	if reply[0] != 'S' && reply[0] != 'N' {
		return fmt.Errorf("the reply to an SSLRequest is not PostgreSQL's: %q", reply[0])
	}
	return nil
}

// PostgresAddr returns where a PostgreSQL client connects for a configured host and port (pgconn's
// Config.Host and Port): a host that is a directory is a Unix socket in it.
func PostgresAddr(host string, port uint16) (network, addr string) {
	if filepath.IsAbs(host) {
		return "unix", filepath.Join(host, ".s.PGSQL."+strconv.Itoa(int(port)))
	}
	return "tcp", net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// Dial dials network/addr and runs probe on the connection (a nil probe: the dial is enough), all
// within timeout.
func Dial(ctx context.Context, network, addr string, probe Probe, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if probe == nil {
		return nil
	}
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return err
	}
	return probe(conn)
}

// Target is one server a test variable names. It is a plain value; Check may be called with it from
// any number of goroutines. A zero Target names no address, and Check reports it as not answering.
type Target struct {
	Env     string // the variable, e.g. SVC_TEST_REDIS_URL
	Value   string // its value; a password in it is masked in messages
	Server  string // what to start, e.g. "Redis"
	Network string // "tcp" or "unix"
	Addr    string
	// Probe checks the answer (Redis, Postgres); nil when the connection cannot be spoken to
	// plainly (TLS), and the dial alone decides.
	Probe Probe
}

// results caches each target's verdict for the life of the test binary: the point of this package
// is that a dead server costs one probe, not one per test. Keyed by the whole Target, so a test that
// sets another value with t.Setenv gets a probe of its own.
var results sync.Map // targetKey → *result

type targetKey struct{ env, value, network, addr string }

type result struct {
	once sync.Once
	err  error
}

// Check probes t once per process, within Timeout, and returns the verdict every later call repeats:
// nil, or an error that says what to do, e.g.
//
//	SVC_TEST_REDIS_URL=redis://127.0.0.1:6399/0 is set but nothing answers at 127.0.0.1:6399:
//	start Redis or unset the variable (dial tcp 127.0.0.1:6399: connect: connection refused)
func Check(t Target) error {
	return check(t, Timeout)
}

func check(t Target, timeout time.Duration) error {
	v, _ := results.LoadOrStore(targetKey{t.Env, t.Value, t.Network, t.Addr}, &result{})
	r := v.(*result)
	r.once.Do(func() {
		if err := Dial(context.Background(), t.Network, t.Addr, t.Probe, timeout); err != nil {
			if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
				err = fmt.Errorf("no answer within %v: %w", timeout, err)
			}
			r.err = fmt.Errorf("%s=%s is set but nothing answers at %s: start %s or unset the variable (%w)",
				t.Env, Redact(t.Value), t.Addr, t.Server, err)
		}
	})
	return r.err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// keywordPassword finds the password in a keyword/value DSN ("host=… password=secret …").
var keywordPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// Redact masks the password of a URL ("redis://:secret@host" → "redis://:xxxxx@host") or of a
// keyword/value DSN, so that a failing test never prints one.
func Redact(value string) string {
	if u, err := url.Parse(value); err == nil && u.Scheme != "" && u.Host != "" {
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	return keywordPassword.ReplaceAllString(value, "${1}xxxxx")
}
