package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook"
)

// svcResult is one finished run of the svc binary.
type svcResult struct {
	code           int
	stdout, stderr string
}

// runSvc runs the real svc binary to completion with env on top of this process's environment and a
// configuration directory of the test's own (a developer's ~/.config/svc never leaks in).
func runSvc(t *testing.T, env []string, stdin string, args ...string) svcResult {
	t.Helper()
	cmd := exec.Command(svcBin, args...)
	cmd.Env = append(append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir()), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running svc %v: %v", args, err)
	}
	return svcResult{code, out.String(), errb.String()}
}

// exports reads the "export NAME='value'" lines of svc's --export into env entries.
func exports(t *testing.T, r svcResult) []string {
	t.Helper()
	require.Equal(t, 0, r.code, r.stderr)
	var env []string
	for _, m := range regexp.MustCompile(`(?m)^export (\w+)='([^']*)'$`).FindAllStringSubmatch(r.stdout, -1) {
		env = append(env, m[1]+"="+m[2])
	}
	require.NotEmpty(t, env, r.stdout)
	return env
}

// delivery is one POST a webhook receiver got, as it came.
type delivery struct {
	body      []byte
	signature string
	sequence  string
}

// sequenceReceiver is a developer's local webhook handler applying the consumer's rule: it verifies
// every delivery and its sequence header, takes the next sequence, acknowledges an old one as a
// duplicate without taking it again, and refuses a jump (svc listen must never cause one).
type sequenceReceiver struct {
	v         *webhook.Verifier
	failEvery int // answer 503 to every failEvery-th attempt, so that listen retries
	// holdAt holds the first delivery of each of these sequences until release is told, so that a
	// test can stop or kill listen while that delivery is in flight; held says it arrived.
	holdAt     map[uint64]bool
	held       chan uint64
	release    chan struct{}
	mu         sync.Mutex
	attempts   int
	last       uint64
	taken      []delivery
	duplicates []uint64
	refused    []string
}

func (rc *sequenceReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.attempts++
	d := delivery{body: body, signature: r.Header.Get(webhook.HeaderSignature), sequence: r.Header.Get(webhook.HeaderSequence)}
	if err := rc.v.Verify(d.signature, body); err != nil {
		rc.refused = append(rc.refused, "signature: "+err.Error())
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	ev, err := webhook.DecodeEvent(body)
	if err == nil {
		err = webhook.CheckSequence(d.sequence, &ev)
	}
	if err == nil && rc.holdAt[ev.Sequence] {
		delete(rc.holdAt, ev.Sequence)
		rc.mu.Unlock()
		rc.held <- ev.Sequence
		<-rc.release
		rc.mu.Lock()
	}
	switch {
	case err != nil:
		rc.refused = append(rc.refused, err.Error())
		w.WriteHeader(http.StatusBadRequest)
	case ev.Sequence <= rc.last:
		rc.duplicates = append(rc.duplicates, ev.Sequence)
		w.WriteHeader(http.StatusOK)
	case ev.Sequence != rc.last+1:
		rc.refused = append(rc.refused, "a gap before sequence "+strconv.FormatUint(ev.Sequence, 10))
		w.WriteHeader(http.StatusConflict)
	case rc.failEvery > 0 && rc.attempts%rc.failEvery == 0:
		w.WriteHeader(http.StatusServiceUnavailable)
	default:
		rc.last = ev.Sequence
		rc.taken = append(rc.taken, d)
		w.WriteHeader(http.StatusNoContent)
	}
}

func (rc *sequenceReceiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.taken)
}

// pushSink receives the server's own deliveries to the endpoint — with the sandbox's faults — and
// keeps the good ones by sequence, to compare with what listen forwards and to feed svc verify.
type pushSink struct {
	v        *webhook.Verifier
	mu       sync.Mutex
	good     map[string]delivery
	badSig   int
	received int
}

func (s *pushSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.received++
	d := delivery{body: body, signature: r.Header.Get(webhook.HeaderSignature), sequence: r.Header.Get(webhook.HeaderSequence)}
	if s.v == nil || s.v.Verify(d.signature, body) != nil {
		s.badSig++ // before the secret is known, or a bad_signature fault: refused, so the server retries
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	s.good[d.sequence] = d
	w.WriteHeader(http.StatusOK)
}

// The proof: the real svc binary against a started reference server. listen forwards 200
// events, under the sandbox's drop/duplicate/reorder/bad-signature faults on the endpoint, to a
// local receiver that sees each once, in order, each signature valid for the secret; listen stopped
// (SIGTERM) and killed (SIGKILL) mid-stream resumes without loss, and without duplicates except the
// one delivery a kill can interrupt, which the receiver's sequence rule recognises; verify accepts
// what the server signs and refuses a one-byte change with the reason.
func TestSvcAgainstTheReferenceServer(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	base := []string{"SVC_BASE_URL=" + srv.URL, "SVC_API_VERSION=v1"}

	// An evaluation of its own, as an operator starts one.
	r := runSvc(t, append(base, "SVC_ADMIN_TOKEN=wrong"), "", "credentials", "new")
	require.Equal(t, 3, r.code, "a wrong admin token is answered as any bad credential on any route")
	require.Contains(t, r.stderr, "401 Unauthorized (api_key_malformed)")
	env := append(base, exports(t, runSvc(t, append(base, "SVC_ADMIN_TOKEN="+srv.AdminToken), "", "credentials", "new", "--export"))...)

	// Its endpoint, whose URL receives the server's own (faulty) deliveries.
	sink := &pushSink{good: map[string]delivery{}}
	sinkSrv := httptest.NewServer(sink)
	defer sinkSrv.Close()
	env = append(env, exports(t, runSvc(t, env, "", "endpoints", "create", "--url", sinkSrv.URL+"/hooks", "--export"))...)
	endpoint, secret := envValue(env, "SVC_ENDPOINT"), envValue(env, "SVC_WEBHOOK_SECRET")
	require.True(t, strings.HasPrefix(endpoint, "we_") && strings.HasPrefix(secret, "whsec_"), "%v", env)
	v, err := webhook.NewVerifier([]string{secret}, nil)
	require.NoError(t, err)
	sink.mu.Lock()
	sink.v = v
	sink.mu.Unlock()

	r = runSvc(t, env, "", "endpoints", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, endpoint)
	require.NotContains(t, r.stdout, "whsec_")

	r = runSvc(t, env, "", "faults", "set", "--drop", "0.2", "--duplicate", "0.2", "--reorder", "0.2", "--bad-signature", "0.2")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "faults on "+endpoint+": drop 0.2, duplicate 0.2, reorder 0.2, bad signature 0.2, delay 0 (0 ms)\n", r.stdout)

	rcv := &sequenceReceiver{v: v, failEvery: 7, holdAt: map[uint64]bool{60: true, 130: true},
		held: make(chan uint64), release: make(chan struct{})}
	local := httptest.NewServer(rcv)
	defer local.Close()
	cursor := filepath.Join(t.TempDir(), "cursor.json")
	listenArgs := []string{"listen", "--forward-to", local.URL + "/webhooks", "--cursor", cursor, "--poll", "50ms"}
	listen := func(name string) *process {
		return startEnv(t, name, svcBin, append(env, "XDG_CONFIG_HOME="+t.TempDir()), listenArgs...)
	}

	// 200 events: 194 orders by plain HTTP, 5 through svc orders create, and one triggered.
	first := listen("svc listen (1)")
	orders := createOrders(t, srv.URL, envValue(env, "SVC_API_KEY"), 194, 4)
	for i := range 5 {
		r := runSvc(t, env, "", "orders", "create", "--account", "acc_svc_"+strconv.Itoa(i), "--side", "buy")
		require.Equal(t, 0, r.code, r.stderr)
		m := regexp.MustCompile(`^order (ord_\w+) created: buy acc_svc_\d, status created\nidempotency key (\S+) `).FindStringSubmatch(r.stdout)
		require.NotNil(t, m, r.stdout)
		orders[m[1]] = true
		// The printed key replays the answer: the same order, never a second one.
		again := runSvc(t, env, "", "orders", "create", "--account", "acc_svc_"+strconv.Itoa(i), "--side", "buy", "--idempotency-key", m[2])
		require.Equal(t, 0, again.code, again.stderr)
		require.Contains(t, again.stdout, "order "+m[1]+" created")
		require.Contains(t, again.stdout, "(replayed: this key was used before; nothing was done a second time)")
	}
	r = runSvc(t, env, "", "trigger", "order.created", "--data", `{"id":"ord_triggered"}`)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^triggered order.created evt_\w+ on `+endpoint+` \(sequence 200\)\n$`, r.stdout)
	orders["ord_triggered"] = true

	// Stopped with a delivery in flight (sequence 60): it is answered, counted, and nothing follows.
	first.waitLine(t, "svc listen: following ")
	require.Equal(t, uint64(60), <-rcv.held)
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGTERM))
	first.waitLine(t, "svc listen: stopping once the delivery in flight is answered")
	rcv.release <- struct{}{}
	first.exited(t, 0)
	first.waitLine(t, "svc listen: stopped; the cursor "+cursor+" is at sequence 60")
	require.Equal(t, 60, rcv.count())

	// Killed with a delivery in flight (sequence 130): the receiver takes it after listen is gone, so
	// the next listen, knowing nothing of that answer, sends it again — once, and the receiver's
	// sequence rule acknowledges it as a duplicate.
	second := listen("svc listen (2)")
	require.Equal(t, uint64(130), <-rcv.held)
	second.kill(t)
	rcv.release <- struct{}{}
	third := listen("svc listen (3)")
	third.waitLine(t, "svc listen: following "+endpoint+" from sequence 130 ")
	eventually(t, deliveryTimeout, func() bool { return rcv.count() >= 200 }, "listen forwarded %d of 200 events", rcv.count())
	third.stop(t)
	third.waitLine(t, "is at sequence 200")

	rcv.mu.Lock()
	taken, dups, refused, attempts := rcv.taken, rcv.duplicates, rcv.refused, rcv.attempts
	rcv.mu.Unlock()
	require.Empty(t, refused, "every forwarded delivery is signed for the secret, with its sequence, in order")
	require.Len(t, taken, 200)
	require.Equal(t, []uint64{130}, dups, "only the delivery the SIGKILL interrupted is forwarded again")
	t.Logf("listen: 200 events taken in %d attempts (every 7th answered 503)", attempts)
	for i, d := range taken {
		ev, err := webhook.DecodeEvent(d.body)
		require.NoError(t, err)
		require.Equal(t, uint64(i+1), ev.Sequence)
		require.Equal(t, endpoint, ev.Endpoint)
		var data struct{ ID string }
		require.NoError(t, json.Unmarshal(ev.Data, &data))
		require.True(t, orders[data.ID], "event %d carries %q, which no order or trigger made", ev.Sequence, data.ID)
		delete(orders, data.ID)
	}
	require.Empty(t, orders, "every order's event was forwarded")

	// svc events prints the same envelopes, byte for byte, and they are what the server itself delivers.
	r = runSvc(t, env, "", "events", "--from", "1", "--to", "200", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 200)
	for i, d := range taken {
		require.Equal(t, lines[i], string(d.body), "sequence %d", i+1)
	}
	sink.mu.Lock()
	good, badSig, received := sink.good, sink.badSig, sink.received
	sink.mu.Unlock()
	t.Logf("the server's own deliveries to the endpoint, with faults: %d received, %d with a bad signature, %d sequences delivered well so far",
		received, badSig, len(good))
	require.Positive(t, badSig, "the bad_signature fault was on")
	var captured delivery
	for seq, d := range good {
		n, _ := strconv.Atoi(seq)
		require.Equal(t, string(taken[n-1].body), string(d.body), "listen forwards the body the platform delivers, sequence %s", seq)
		captured = d
	}
	require.NotEmpty(t, captured.body, "some deliveries got through the faults")

	// verify: what the server signed is authentic; any one-byte change is refused, with the reason.
	bodyFile := filepath.Join(t.TempDir(), "delivery.json")
	require.NoError(t, os.WriteFile(bodyFile, captured.body, 0o600))
	r = runSvc(t, env, "", "verify", "--signature", captured.signature, "--body", bodyFile, "--sequence", captured.sequence,
		"--endpoint", endpoint)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "valid: signed with the secret at ")
	for _, i := range []int{0, len(captured.body) / 2, len(captured.body) - 1} {
		changed := bytes.Clone(captured.body)
		changed[i] ^= 0x20
		r = runSvc(t, env, string(changed), "verify", "--signature", captured.signature)
		require.Equal(t, 1, r.code, "byte %d changed", i)
		require.Contains(t, r.stderr, "svc: no v1 signature matches the secret: the body is not byte for byte what was signed (stdin)")
	}
	r = runSvc(t, env, string(taken[9].body), "verify", "--signature", taken[9].signature, "--sequence", "11")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "X-SVC-Sequence 11 does not match the signed body's sequence 10")

	// The server's refusals are shown as its problem: the detail and each located violation.
	r = runSvc(t, env, "", "orders", "create", "--account", "a b", "--side", "hold")
	require.Equal(t, 3, r.code)
	require.Contains(t, r.stderr, "400 Bad Request (validation_failed)")
	require.Contains(t, r.stderr, "  - body /side: must be one of buy, sell (invalid_enum)")
	r = runSvc(t, append(env, "SVC_API_KEY="+srv.LiveKey), "", "faults", "clear")
	require.Equal(t, 3, r.code, "a production key cannot see the sandbox's controls")
	require.Contains(t, r.stderr, "404 Not Found (route_not_found)")
	r = runSvc(t, env, "", "faults", "clear")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "faults on "+endpoint+": none\n", r.stdout)
}

// waitLine waits for a stderr line of p that contains s.
func (p *process) waitLine(t *testing.T, s string) {
	t.Helper()
	eventually(t, startTimeout, func() bool {
		return slices.ContainsFunc(p.stderr.Lines(), func(l string) bool { return strings.Contains(l, s) })
	},
		"%s never printed %q", p.name, s)
}

// exited waits for p to exit by itself (it was signalled already) with the given status.
func (p *process) exited(t *testing.T, code int) {
	t.Helper()
	p.stopOnce.Do(func() {
		select {
		case <-p.done:
		case <-time.After(stopTimeout):
			_ = p.cmd.Process.Kill()
			<-p.done
			t.Fatalf("%s did not exit within %s", p.name, stopTimeout)
		}
	})
	require.Equal(t, code, p.cmd.ProcessState.ExitCode(), "%s's exit status", p.name)
}

func envValue(env []string, name string) string {
	v := ""
	for _, e := range env {
		if k, val, ok := strings.Cut(e, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// A licensee pinned to v2 speaks v2 through svc: the order's side is sent as "direction", and the
// events come rendered at v2. A production key on a version other than its pin is refused, and svc
// says which version to set.
func TestSvcPinnedToV2(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	base := []string{"SVC_BASE_URL=" + srv.URL, "SVC_API_VERSION=v2"}
	env := append(base, exports(t, runSvc(t, append(base, "SVC_ADMIN_TOKEN="+srv.AdminToken), "", "credentials", "new", "--export"))...)
	env = append(env, exports(t, runSvc(t, env, "", "endpoints", "create", "--url", "http://127.0.0.1:9/unused", "--export"))...)

	r := runSvc(t, env, "", "orders", "create", "--account", "acc_v2", "--side", "sell")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "created: sell acc_v2, status created")
	eventually(t, deliveryTimeout, func() bool {
		r = runSvc(t, env, "", "events", "--from", "1", "--json")
		return r.code == 0 && strings.Count(r.stdout, "\n") == 1
	}, "the order's event is numbered: %+v", r)
	require.Contains(t, r.stdout, `"api_version":"v2"`)
	require.Contains(t, r.stdout, `"direction":"sell"`)

	live := append(slices.Clone(base), "SVC_API_KEY="+srv.LiveKey)
	r = runSvc(t, live, "", "endpoints", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "no webhook endpoints")
	r = runSvc(t, live, "", "endpoints", "list", "--api-version", "v1")
	require.Equal(t, 3, r.code)
	require.Contains(t, r.stderr, "403 Forbidden (version_not_enabled)")
	require.Contains(t, r.stderr, "the key's licensee is pinned to v2: set SVC_API_VERSION=v2 (or pass --api-version v2)")
}
