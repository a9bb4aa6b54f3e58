package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/internal/syncbuf"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/webhooktest"
)

const (
	testSecret = "whsec_listen_test_secret"
	testKey    = "sk_sandbox_listen_test"
	testEP     = "we_listen"
)

// hostileRange serves a Source's range endpoint through the faults a network and a man in the middle
// can cause: connections cut, 502s, bodies altered after signing, and pages answered for another
// request (a stale page, replayed). Every page svc accepts must still be the true one.
type hostileRange struct {
	src      *webhooktest.Source
	mu       sync.Mutex
	rng      *rand.Rand
	old      [][]byte // earlier answers, to replay
	oldHdr   []http.Header
	n        map[string]int // faults injected, by kind
	requests int
}

func (h *hostileRange) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	h.src.ServeHTTP(rec, r)
	h.mu.Lock()
	var replay []byte
	var replayHeader http.Header
	if len(h.old) > 0 {
		i := h.rng.IntN(len(h.old))
		replay, replayHeader = h.old[i], h.oldHdr[i]
	}
	if rec.Code == http.StatusOK {
		h.old, h.oldHdr = append(h.old, rec.Body.Bytes()), append(h.oldHdr, rec.Header().Clone())
	}
	// Every request but one in three meets a fault, in turn, so that each kind is met however
	// few pages the run needs.
	kind := []string{"cut", "", "502", "altered", "", "replayed"}[h.requests%6]
	h.requests++
	if kind == "altered" && (rec.Code != http.StatusOK || rec.Body.Len() < 40) || kind == "replayed" && replay == nil {
		kind = ""
	}
	h.n[kind]++
	h.mu.Unlock()
	switch kind {
	case "cut":
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	case "502":
		w.WriteHeader(http.StatusBadGateway)
		return
	case "altered":
		body := bytes.Clone(rec.Body.Bytes())
		body[len(body)/2] ^= 0x01
		copyHeader(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
		return
	case "replayed":
		copyHeader(w.Header(), replayHeader)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(replay)
		return
	}
	copyHeader(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = v
	}
}

// receiver is the developer's local webhook handler: it verifies each delivery as a consumer does,
// fails some first attempts, and records what it accepted.
type receiver struct {
	v        *webhook.Verifier
	mu       sync.Mutex
	rng      *rand.Rand
	failRate float64
	accepted []uint64 // sequences answered 2xx, in arrival order
	bodies   map[uint64][]byte
	attempts int
	refused  []string      // deliveries that failed verification (must stay empty)
	block    chan struct{} // when set, each delivery waits for it
	arrived  chan uint64   // when set, told of each arrival
}

func newReceiver(t testing.TB, failRate float64) *receiver {
	v, err := webhook.NewVerifier([]string{testSecret}, nil)
	require.NoError(t, err)
	return &receiver{v: v, rng: rand.New(rand.NewPCG(7, 7)), failRate: failRate, bodies: map[uint64][]byte{}}
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if rc.arrived != nil {
		rc.arrived <- 0
	}
	if rc.block != nil {
		<-rc.block
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.attempts++
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
		rc.refused = append(rc.refused, "method or content type")
	}
	if err := rc.v.Verify(r.Header.Get(webhook.HeaderSignature), body); err != nil {
		rc.refused = append(rc.refused, err.Error())
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	ev, err := webhook.DecodeEvent(body)
	if err == nil {
		err = webhook.CheckSequence(r.Header.Get(webhook.HeaderSequence), &ev)
	}
	if err != nil {
		rc.refused = append(rc.refused, err.Error())
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if rc.rng.Float64() < rc.failRate {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	rc.accepted = append(rc.accepted, ev.Sequence)
	rc.bodies[ev.Sequence] = body
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) snapshot() ([]uint64, []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]uint64(nil), rc.accepted...), append([]string(nil), rc.refused...)
}

// listenRun is a listen running in the background.
type listenRun struct {
	interrupts     chan os.Signal
	stdout, stderr *syncbuf.Buffer
	done           chan int
}

func startListen(t *testing.T, vars map[string]string, args ...string) *listenRun {
	t.Helper()
	e, out, errb := testEnv(t, vars, "")
	sig := make(chan os.Signal, 2)
	e.interrupts = sig
	l := &listenRun{interrupts: sig, stdout: out, stderr: errb, done: make(chan int, 1)}
	go func() { l.done <- run(append([]string{"listen"}, args...), e) }()
	t.Cleanup(func() {
		select {
		case <-l.done:
		default:
			sig <- os.Interrupt
			sig <- os.Interrupt
			<-l.done
		}
	})
	return l
}

func (l *listenRun) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-l.done:
		l.done <- code
		return code
	case <-time.After(30 * time.Second):
		t.Fatalf("listen did not stop; stderr:\n%s", l.stderr.String())
		return -1
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling a condition, not timing behaviour
	}
}

func fastTiming(t *testing.T) {
	saved := defaultTiming
	defaultTiming.minBackoff, defaultTiming.maxBackoff = time.Millisecond, 5*time.Millisecond
	t.Cleanup(func() { defaultTiming = saved })
}

func seq(from, to uint64) []uint64 {
	var s []uint64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// listen forwards every event once, in order, signed for the secret, through a hostile range
// endpoint and a local handler that fails some attempts; a stopped listen resumes from its cursor.
func TestListenForwardsEachEventOnceInOrder(t *testing.T) {
	fastTiming(t)
	src := webhooktest.NewSource(testSecret, testKey, nil)
	for i := range 250 {
		src.Emit(testEP, "order.created", map[string]any{"n": i})
	}
	hostile := &hostileRange{src: src, rng: rand.New(rand.NewPCG(1, 2)), n: map[string]int{}}
	api := httptest.NewServer(hostile)
	defer api.Close()
	rcv := newReceiver(t, 0.2)
	local := httptest.NewServer(rcv)
	defer local.Close()
	cursor := filepath.Join(t.TempDir(), "cursor.json")
	vars := map[string]string{envAPIKey: testKey, envSecret: testSecret, envBaseURL: api.URL, envEndpoint: testEP}
	args := []string{"--forward-to", local.URL + "/hook", "--cursor", cursor, "--poll", "5ms", "--json"}

	l := startListen(t, vars, args...)
	waitFor(t, "250 events", func() bool { got, _ := rcv.snapshot(); return len(got) >= 250 })
	l.interrupts <- os.Interrupt
	require.Equal(t, exitOK, l.wait(t), l.stderr.String())
	got, refused := rcv.snapshot()
	require.Empty(t, refused)
	require.Equal(t, seq(1, 250), got)
	for _, ev := range src.Events(testEP) {
		require.JSONEq(t, string(webhooktest.Body(ev)), string(rcv.bodies[ev.Sequence]))
		require.Equal(t, webhooktest.Body(ev), rcv.bodies[ev.Sequence], "the body is the envelope as the producer writes it")
	}
	hostile.mu.Lock()
	t.Logf("faults injected on range retrieval: %v; local attempts %d", hostile.n, rcv.attempts)
	require.Positive(t, hostile.n["altered"])
	require.Positive(t, hostile.n["replayed"])
	require.Positive(t, hostile.n["cut"])
	hostile.mu.Unlock()
	require.Contains(t, l.stderr.String(), "svc listen: stopped; the cursor "+cursor+" is at sequence 250")
	var st cursorState
	data, err := os.ReadFile(cursor)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &st))
	require.Equal(t, uint64(250), st.Sequence)
	require.Equal(t, testEP, st.Endpoint)

	// One JSON line per attempt: the delivered ones name their status and latency.
	var delivered int
	for _, line := range strings.Split(strings.TrimSpace(l.stdout.String()), "\n") {
		var a attemptLine
		require.NoError(t, json.Unmarshal([]byte(line), &a), line)
		if a.Delivered {
			delivered++
			require.Equal(t, http.StatusNoContent, a.Status)
			require.Equal(t, "order.created", a.Type)
		} else {
			require.Equal(t, http.StatusInternalServerError, a.Status)
			require.Positive(t, a.RetryInMS)
		}
	}
	require.Equal(t, 250, delivered)

	// Started again, it resumes after the cursor: only the new events, and --from cannot rewind it.
	for range 5 {
		src.Emit(testEP, "order.created", nil)
	}
	l = startListen(t, vars, append(args, "--from", "1")...)
	waitFor(t, "255 events", func() bool { got, _ := rcv.snapshot(); return len(got) >= 255 })
	l.interrupts <- os.Interrupt
	require.Equal(t, exitOK, l.wait(t))
	got, _ = rcv.snapshot()
	require.Equal(t, seq(1, 255), got)
	require.Contains(t, l.stderr.String(), "--from 1 is ignored: the cursor")
}

// Ctrl-C while a delivery is in flight lets it finish and keeps its answer; a second one abandons it,
// and the cursor stays before it.
func TestListenInterrupts(t *testing.T) {
	fastTiming(t)
	src := webhooktest.NewSource(testSecret, testKey, nil)
	for range 3 {
		src.Emit(testEP, "order.created", nil)
	}
	api := httptest.NewServer(src)
	defer api.Close()
	vars := map[string]string{envAPIKey: testKey, envSecret: testSecret, envBaseURL: api.URL}

	t.Run("one interrupt: the delivery in flight is answered and counted, and nothing follows it", func(t *testing.T) {
		rcv := newReceiver(t, 0)
		rcv.block, rcv.arrived = make(chan struct{}), make(chan uint64, 10)
		local := httptest.NewServer(rcv)
		defer local.Close()
		cursor := filepath.Join(t.TempDir(), "c.json")
		l := startListen(t, vars, "--endpoint", testEP, "--forward-to", local.URL, "--cursor", cursor)
		<-rcv.arrived // sequence 1 is at the receiver, waiting
		l.interrupts <- os.Interrupt
		waitFor(t, "the stopping notice", func() bool { return strings.Contains(l.stderr.String(), "stopping once the delivery in flight") })
		close(rcv.block)
		require.Equal(t, exitOK, l.wait(t))
		got, _ := rcv.snapshot()
		require.Equal(t, []uint64{1}, got)
		require.Contains(t, l.stderr.String(), "is at sequence 1")
	})
	t.Run("two interrupts: the delivery in flight is abandoned and will be sent again", func(t *testing.T) {
		rcv := newReceiver(t, 0)
		rcv.block, rcv.arrived = make(chan struct{}), make(chan uint64, 10)
		local := httptest.NewServer(rcv)
		defer local.Close()
		defer close(rcv.block)
		cursor := filepath.Join(t.TempDir(), "c.json")
		l := startListen(t, vars, "--endpoint", testEP, "--forward-to", local.URL, "--cursor", cursor)
		<-rcv.arrived
		l.interrupts <- os.Interrupt
		l.interrupts <- os.Interrupt
		require.Equal(t, exitInterrupted, l.wait(t))
		require.Contains(t, l.stderr.String(), "the delivery in flight was abandoned")
		_, err := os.Stat(cursor)
		require.ErrorIs(t, err, os.ErrNotExist, "no delivery was answered, so the cursor was never written")
	})
}

// Two listens on one cursor would both forward every event: the second is refused.
func TestListenCursorIsLocked(t *testing.T) {
	fastTiming(t)
	src := webhooktest.NewSource(testSecret, testKey, nil)
	src.Emit(testEP, "order.created", nil)
	api := httptest.NewServer(src)
	defer api.Close()
	local := httptest.NewServer(newReceiver(t, 0))
	defer local.Close()
	cursor := filepath.Join(t.TempDir(), "c.json")
	vars := map[string]string{envAPIKey: testKey, envSecret: testSecret, envBaseURL: api.URL}
	first := startListen(t, vars, "--endpoint", testEP, "--forward-to", local.URL, "--cursor", cursor)
	waitFor(t, "the first listen to start", func() bool { return strings.Contains(first.stderr.String(), "following") })
	r := runSvc(t, vars, "", "listen", "--endpoint", testEP, "--forward-to", local.URL, "--cursor", cursor)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "another svc listen is following this endpoint")

	r = runSvc(t, vars, "", "listen", "--endpoint", "we_other", "--forward-to", local.URL, "--cursor", cursor)
	require.Equal(t, exitUsage, r.code, "a cursor of another endpoint is refused before its lock is even tried")
	if !strings.Contains(r.stderr, "follows endpoint we_listen, not we_other") {
		require.Contains(t, r.stderr, "another svc listen")
	}
}

// Events pruned past the cursor are a loss listen refuses to hide; without a cursor it starts at
// the oldest event kept.
func TestListenPruned(t *testing.T) {
	fastTiming(t)
	src := webhooktest.NewSource(testSecret, testKey, nil)
	for range 8 {
		src.Emit(testEP, "order.created", nil)
	}
	const first = 5
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if from, _ := strconv.ParseUint(r.URL.Query().Get("from"), 10, 64); from < first {
			apierror.Write(w, r, apierror.Gone("events_pruned", fmt.Sprintf("events %d–4 are gone", from),
				apierror.Query("from", "events_pruned", "must be at least 5")).With("first_retained", first))
			return
		}
		src.ServeHTTP(w, r)
	}))
	defer api.Close()
	rcv := newReceiver(t, 0)
	local := httptest.NewServer(rcv)
	defer local.Close()
	vars := map[string]string{envAPIKey: testKey, envSecret: testSecret, envBaseURL: api.URL, envEndpoint: testEP}

	cursor := filepath.Join(t.TempDir(), "c.json")
	l := startListen(t, vars, "--forward-to", local.URL, "--cursor", cursor)
	waitFor(t, "events 5–8", func() bool { got, _ := rcv.snapshot(); return len(got) == 4 })
	l.interrupts <- os.Interrupt
	require.Equal(t, exitOK, l.wait(t))
	got, _ := rcv.snapshot()
	require.Equal(t, seq(5, 8), got)
	require.Contains(t, l.stderr.String(), "the events before sequence 5 were pruned; starting at 5")

	stale := filepath.Join(t.TempDir(), "stale.json")
	c, err := openCursor(stale, testEP, api.URL, os.Geteuid())
	require.NoError(t, err)
	require.NoError(t, c.save(2))
	c.close()
	r := runSvc(t, vars, "", "listen", "--forward-to", local.URL, "--cursor", stale)
	require.Equal(t, exitLost, r.code)
	require.Contains(t, r.stderr, "the events 3–4 of we_listen, after the cursor, were pruned before they were forwarded")
}

// A refusal that waiting cannot change ends listen with the problem; pages that never verify are
// the wrong secret, most likely, and listen says so and stops, having forwarded nothing from them.
func TestListenStopsOnWhatWaitingCannotFix(t *testing.T) {
	fastTiming(t)
	src := webhooktest.NewSource(testSecret, testKey, nil)
	src.Emit(testEP, "order.created", nil)
	api := httptest.NewServer(src)
	defer api.Close()
	rcv := newReceiver(t, 0)
	local := httptest.NewServer(rcv)
	defer local.Close()
	for _, tc := range []struct {
		name, key, secret string
		code              int
		want              []string
	}{
		{"an unknown key", "sk_sandbox_wrong", testSecret, exitRefused, []string{"401"}},
		{"the wrong secret", testKey, "whsec_not_this_one", exitInvalid, []string{
			"5 range pages in a row did not verify with SVC_WEBHOOK_SECRET",
			"svc listen: the events from sequence 1 did not verify with SVC_WEBHOOK_SECRET, so they are not used; retrying"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runSvc(t, map[string]string{envAPIKey: tc.key, envSecret: tc.secret, envBaseURL: api.URL}, "",
				"listen", "--endpoint", testEP, "--forward-to", local.URL, "--cursor", filepath.Join(t.TempDir(), "c"))
			require.Equal(t, tc.code, r.code, r.stderr)
			for _, w := range tc.want {
				require.Contains(t, r.stderr, w)
			}
			require.NotContains(t, r.stderr, tc.key)
			require.NotContains(t, r.stderr, tc.secret)
			got, _ := rcv.snapshot()
			require.Empty(t, got)
		})
	}
}

// After 'svc endpoints roll-secret' the server signs every range page with the new secret and the old
// one until the old one expires. A listen holding the old secret still verifies and forwards, and
// says once that the secret was rolled; one that holds the new secret has nothing to be told.
func TestListenThroughASecretRoll(t *testing.T) {
	fastTiming(t)
	const rolled = "whsec_listen_test_rolled"
	src := webhooktest.NewSource(testSecret, testKey, nil)
	for range 3 {
		src.Emit(testEP, "order.created", nil)
	}
	var pages atomic.Int64
	api := func(secrets ...string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			src.ServeHTTP(rec, r)
			copyHeader(w.Header(), rec.Header())
			if rec.Code == http.StatusOK {
				sig, err := webhook.Sign(rec.Body.Bytes(), time.Now(), secrets...) // the newest first, as the producer signs
				if err != nil {
					panic(err)
				}
				w.Header().Set(webhook.HeaderSignature, sig)
				pages.Add(1)
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	during, before := api(rolled, testSecret), api(testSecret)
	const notice = "svc listen: the endpoint's secret was rolled: its pages are signed with a new secret besides the one in SVC_WEBHOOK_SECRET. " +
		"listen goes on verifying with the secret it has until that one expires, when its pages stop verifying; " +
		"'svc endpoints roll-secret' printed the new secret: set SVC_WEBHOOK_SECRET to it (or to both, comma-separated, while the old one still signs) and start listen again\n"
	for _, tc := range []struct {
		name    string
		api     *httptest.Server
		secrets string
		notice  bool
	}{
		{"holding the old secret", during, testSecret, true},
		{"holding the old secret and one of another endpoint", during, testSecret + ",whsec_listen_test_unrelated", true},
		{"holding the new secret", during, rolled, false},
		{"holding both", during, rolled + "," + testSecret, false},
		{"no roll", before, testSecret, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newReceiver(t, 0)
			v, err := webhook.NewVerifier([]string{rolled, testSecret}, nil)
			require.NoError(t, err)
			rcv.v = v
			local := httptest.NewServer(rcv)
			defer local.Close()
			l := startListen(t, map[string]string{envAPIKey: testKey, envSecret: tc.secrets, envBaseURL: tc.api.URL, envEndpoint: testEP},
				"--forward-to", local.URL, "--cursor", filepath.Join(t.TempDir(), "c.json"), "--poll", "1ms")
			waitFor(t, "3 events", func() bool { got, _ := rcv.snapshot(); return len(got) == 3 })
			seen := pages.Load()
			waitFor(t, "more pages", func() bool { return pages.Load() >= seen+5 })
			l.interrupts <- os.Interrupt
			require.Equal(t, exitOK, l.wait(t), l.stderr.String())
			got, refused := rcv.snapshot()
			require.Equal(t, seq(1, 3), got)
			require.Empty(t, refused)
			if tc.notice {
				require.Equal(t, 1, strings.Count(l.stderr.String(), notice), l.stderr.String())
			} else {
				require.NotContains(t, l.stderr.String(), "secret was rolled")
			}
			require.NotContains(t, l.stderr.String(), "did not verify")
		})
	}
}

// v1Signatures reads what the verifier reads: the t= digits, and the distinct readable v1 in order.
func TestV1Signatures(t *testing.T) {
	a, b := strings.Repeat("ab", 32), strings.Repeat("cd", 32)
	many := "t=1"
	for i := range 9 {
		many += fmt.Sprintf(",v1=%064x", i)
	}
	for _, tc := range []struct {
		name, header, ts string
		n                int
	}{
		{"one signature", "t=1700000000,v1=" + a, "1700000000", 1},
		{"two, the newest first", "t=1700000000,v1=" + a + ",v1=" + b, "1700000000", 2},
		{"the same one twice, in another case", "t=1700000000,v1=" + a + ",v1=" + strings.ToUpper(a), "1700000000", 1},
		{"unreadable ones and other schemes are skipped", "t=1700000000,v1=" + a + ",v1=zz,v0=" + b + ",v1=" + b[:10] + ",v1=" + b + "0", "1700000000", 1},
		{"no t=", "v1=" + a + ",v1=" + b, "", 0},
		{"no v1", "t=1700000000", "", 0},
		{"empty", "", "", 0},
		{"more than the verifier accepts", many, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, newest, n := v1Signatures(tc.header)
			require.Equal(t, tc.ts, ts)
			require.Equal(t, tc.n, n)
			if n > 0 {
				require.Equal(t, a, fmt.Sprintf("%x", newest))
			}
		})
	}
}

// FuzzV1Signatures: a range page's signature header comes from the network.
func FuzzV1Signatures(f *testing.F) {
	for _, s := range []string{"t=1700000000,v1=" + strings.Repeat("ab", 32), "t=1,v1=" + strings.Repeat("0", 64) + ",v1=" + strings.Repeat("F", 64),
		"t=,v1=,,=", "t=1,v1=" + strings.Repeat("a", 65)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		ts, newest, n := v1Signatures(header)
		if n < 0 || n > 8 || (n > 0) != (ts != "") {
			t.Fatalf("ts %q, n %d", ts, n)
		}
		if n > 0 && !strings.Contains(strings.ToLower(header), fmt.Sprintf("v1=%x", newest)) {
			t.Fatalf("the newest v1 %x is not in the header", newest)
		}
	})
}
