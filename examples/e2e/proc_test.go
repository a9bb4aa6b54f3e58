package e2e

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Bounds of the waits: generous for a loaded CI machine with -race, and never a sleep — every wait
// polls its condition until it holds or the deadline passes.
const (
	startTimeout    = 30 * time.Second
	deliveryTimeout = 60 * time.Second
	stopTimeout     = 20 * time.Second
	pollEvery       = 10 * time.Millisecond
)

// eventually polls cond until it holds, failing the test at the deadline.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s: "+format, append([]any{timeout}, args...)...)
		}
		<-tick.C
	}
}

// lineLog collects a process's output line by line.
type lineLog struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

func (l *lineLog) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// process is one of the programs under test, running.
type process struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr lineLog
	done           chan struct{}
	waitErr        error
	stopOnce       sync.Once
}

// startEnv runs bin with args and env (KEY=value, on top of this process's environment), and stops it
// (SIGTERM, then a check of a clean exit) when the test ends.
func startEnv(t *testing.T, name, bin string, env []string, args ...string) *process {
	t.Helper()
	p := &process{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			p.dumpStderr(t)
		}
	})
	return p
}

// stop sends SIGTERM and checks that the process shuts down gracefully: exit status 0 in time.
func (p *process) stop(t *testing.T) {
	t.Helper()
	p.stopOnce.Do(func() {
		select {
		case <-p.done:
			t.Errorf("%s exited before it was stopped: %v", p.name, p.waitErr)
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			if p.waitErr != nil {
				t.Errorf("%s did not shut down cleanly on SIGTERM: %v", p.name, p.waitErr)
			}
		case <-time.After(stopTimeout):
			_ = p.cmd.Process.Kill()
			<-p.done
			t.Errorf("%s did not stop within %s of SIGTERM", p.name, stopTimeout)
		}
	})
}

// kill ends the process abruptly, as a crash would.
func (p *process) kill(t *testing.T) {
	t.Helper()
	p.stopOnce.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
}

func (p *process) dumpStderr(t *testing.T) {
	lines := p.stderr.Lines()
	if n := len(lines); n > 60 {
		lines = lines[n-60:]
	}
	t.Logf("last lines of %s's stderr:\n%s", p.name, strings.Join(lines, "\n"))
}

// stdoutValue waits for a stdout line "<prefix><value>" and returns the value.
func (p *process) stdoutValue(t *testing.T, prefix string) string {
	t.Helper()
	var value string
	eventually(t, startTimeout, func() bool {
		select {
		case <-p.done:
			t.Fatalf("%s exited during start: %v", p.name, p.waitErr)
		default:
		}
		for _, l := range p.stdout.Lines() {
			if v, ok := strings.CutPrefix(l, prefix); ok {
				value = strings.TrimSpace(v)
				return true
			}
		}
		return false
	}, "%s never printed %q", p.name, prefix)
	return value
}

// orderServer is a running orderserver and what it printed at start.
type orderServer struct {
	*process
	URL, SandboxKey, LiveKey, AdminToken string
}

// loopbackAllow opens the orderserver's webhook guard for loopback: the tests' consumers listen
// there, and the guard refuses it by default.
const loopbackAllow = "SVC_WEBHOOK_ALLOW=sandbox=127.0.0.0/8,::1/128,localhost"

// The orderserver's secrets, as its environment carries them (never flags: they show in ps).
func postgresEnv(dsn string) string     { return "SVC_POSTGRES_DSN=" + dsn }
func redisEnv(url string) string        { return "SVC_REDIS_URL=" + url }
func adminTokenEnv(token string) string { return "SVC_ADMIN_TOKEN=" + token }

// startOrderServer starts an orderserver on a free loopback port, delivering to loopback.
func startOrderServer(t *testing.T, name string, args ...string) *orderServer {
	t.Helper()
	return startOrderServerEnv(t, name, []string{loopbackAllow}, args...)
}

// startOrderServerEnv starts an orderserver on a free loopback port with env set; an empty env
// entry "SVC_WEBHOOK_ALLOW=" gives the default guard: public addresses only.
func startOrderServerEnv(t *testing.T, name string, env []string, args ...string) *orderServer {
	t.Helper()
	// None of the secrets of this process's own environment, only env's.
	env = append([]string{postgresEnv(""), redisEnv(""), adminTokenEnv("")}, env...)
	p := startEnv(t, name, orderserverBin, env, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	s := &orderServer{process: p}
	s.URL = p.stdoutValue(t, "listening on ")
	s.SandboxKey = p.stdoutValue(t, "sandbox API key: ")
	s.LiveKey = p.stdoutValue(t, "live API key: ")
	s.AdminToken = p.stdoutValue(t, "admin token: ")
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") || !strings.HasPrefix(s.SandboxKey, "sk_sandbox_") ||
		!strings.HasPrefix(s.LiveKey, "sk_live_") || s.AdminToken == "" {
		t.Fatalf("unexpected startup output: %q", p.stdout.Lines())
	}
	return s
}

// consumerProc is a running consumer.
type consumerProc struct {
	*process
	URL  string
	Env  []string // its secrets, as the environment carries them (never flags: they show in ps)
	Args []string // the flags it was started with, -addr aside
}

// consumerEnv is the environment that hands a consumer its signing secret and API key.
func consumerEnv(secret, apiKey string) []string {
	return []string{"SVC_WEBHOOK_SECRET=" + secret, "SVC_API_KEY=" + apiKey}
}

// startConsumer starts a consumer on addr (use freeAddr) for an endpoint of server, with env
// (consumerEnv) carrying its secrets.
func startConsumer(t *testing.T, name, addr string, env []string, args ...string) *consumerProc {
	t.Helper()
	// No DSN of this process's own environment, only env's.
	env = append([]string{postgresEnv("")}, env...)
	p := startEnv(t, name, consumerBin, env, append([]string{"-addr", addr}, args...)...)
	return &consumerProc{process: p, URL: p.stdoutValue(t, "listening on "), Env: env, Args: args}
}

// freeAddr returns a loopback address that was free a moment ago. The consumer's URL must be
// registered before the consumer can start (it needs the endpoint's secret), so its port is chosen
// first.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// processedEvent is one "processed event" log line of the consumer.
type processedEvent struct {
	Sequence   uint64
	EventID    string
	Order      string
	APIVersion string
	Recovered  bool
}

var logField = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S+)`)

// processed parses the consumer's "processed event" lines.
func (c *consumerProc) processed() []processedEvent {
	var out []processedEvent
	for _, l := range c.stderr.Lines() {
		if !strings.Contains(l, `msg="processed event"`) {
			continue
		}
		var ev processedEvent
		for _, m := range logField.FindAllStringSubmatch(l, -1) {
			switch m[1] {
			case "sequence":
				ev.Sequence, _ = strconv.ParseUint(m[2], 10, 64)
			case "event_id":
				ev.EventID = m[2]
			case "order":
				ev.Order = m[2]
			case "api_version":
				ev.APIVersion = m[2]
			case "recovered_by_range":
				ev.Recovered = m[2] == "true"
			}
		}
		out = append(out, ev)
	}
	return out
}
