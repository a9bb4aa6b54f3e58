package e2e

import (
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Behaviour an evaluator meets first, beyond the routes themselves: what every refusal carries, what
// the consumer says about a delivery it refuses, how quickly the programs stop, and their -h.

// Refusals written before the versioning router runs (authentication) still echo the version of
// the path, like every other answer on a known version; an unknown version is never echoed.
func TestRefusalsEchoTheVersion(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	for _, rq := range []request{
		{Method: "POST", URL: srv.URL + "/v1/orders", Key: newKey(), Body: orderBody},
		{Method: "GET", URL: srv.URL + "/v1/orders/ord_x", Auth: "Basic x"},
		{Method: "GET", URL: srv.URL + "/v1/webhook_endpoints/we_x/events?from=1", Auth: "Bearer sk_sandbox_nope"},
	} {
		r := rq.do(t)
		r.expectProblem(t, http.StatusUnauthorized, r.object(t)["code"].(string))
		require.Equal(t, "v1", r.Header.Get("X-SVC-Version"), "%s %s", rq.Method, rq.URL)
	}
	r := request{Method: "GET", URL: srv.URL + "/v9/orders/ord_x"}.do(t)
	require.Equal(t, http.StatusUnauthorized, r.Status)
	require.Empty(t, r.Header.Get("X-SVC-Version"), "an unknown version is never echoed")
}

// The faults control is set with POST (the contract); any other method but PUT and DELETE is 405
// with an Allow that lists POST, not only the methods of the sandbox package's control.
func TestFaultsControlAllowsPOST(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	id, _ := registerEndpoint(t, srv.URL, srv.SandboxKey, unreachable)
	url := srv.URL + "/v1/sandbox/webhook_endpoints/" + id + "/faults"
	r := request{Method: "GET", URL: url, Auth: bearer(srv.SandboxKey)}.do(t)
	r.expectProblem(t, http.StatusMethodNotAllowed, "method_not_allowed")
	require.Equal(t, "POST, PUT, DELETE", r.Header.Get("Allow"))
	require.Equal(t, "v1", r.Header.Get("X-SVC-Version"))
	// PUT and DELETE remain the control's own; a production key still sees nothing at all.
	request{Method: "PUT", URL: url, Auth: bearer(srv.SandboxKey), Key: newKey(), Body: `{"drop":0.1}`}.do(t).
		expectJSON(t, http.StatusOK)
	request{Method: "GET", URL: url, Auth: bearer(srv.LiveKey)}.do(t).expectProblem(t, http.StatusNotFound, "route_not_found")
}

// A delivery the consumer refuses is logged with its status, code and sequence — never its
// signature — so that the bad_signature fault is visible on the consumer's side too.
func TestConsumerLogsRefusedDeliveries(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	w := startWebhookSetup(t, srv, srv.SandboxKey)
	sig := "t=" + strconv.FormatInt(time.Now().Unix(), 10) + ",v1=" + strings.Repeat("0", 64)
	req, err := http.NewRequest("POST", w.consumer.URL+"/webhooks", strings.NewReader(
		`{"id":"evt_x","sequence":1,"type":"order.created","created":1,"api_version":"v1","data":{}}`))
	require.NoError(t, err)
	req.Header.Set("X-SVC-Signature", sig)
	req.Header.Set("X-SVC-Sequence", "1")
	resp, err := client.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	var line string
	eventually(t, startTimeout, func() bool {
		for _, l := range w.consumer.stderr.Lines() {
			if strings.Contains(l, "delivery refused") {
				line = l
				return true
			}
		}
		return false
	}, "the consumer logged no refused delivery")
	require.Contains(t, line, "level=WARN")
	require.Contains(t, line, "status=401")
	require.Contains(t, line, "code=signature_")
	require.Contains(t, line, "sequence=1")
	require.NotContains(t, line, strings.Repeat("0", 64), "a log line never holds a signature")
}

// A client connection that never sent a request (Go's transport leaves such connections in its pool)
// must not hold the shutdown: both programs stop promptly on SIGTERM.
func TestStopIsPromptWithSilentConnections(t *testing.T) {
	srv := startOrderServer(t, "orderserver")
	w := startWebhookSetup(t, srv, srv.SandboxKey)
	for _, p := range []struct {
		proc *process
		url  string
	}{{w.consumer.process, w.consumer.URL}, {srv.process, srv.URL}} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
		require.NoError(t, err)
		defer conn.Close()
		time.Sleep(50 * time.Millisecond) // let the server accept it
		begin := time.Now()
		require.NoError(t, p.proc.cmd.Process.Signal(syscall.SIGTERM))
		select {
		case <-p.proc.done:
		case <-time.After(stopTimeout):
			t.Fatalf("%s did not stop", p.proc.name)
		}
		require.NoError(t, p.proc.waitErr, "%s exits 0 on SIGTERM", p.proc.name)
		require.Less(t, time.Since(begin), 3*time.Second, "%s waited on a connection without a request", p.proc.name)
		p.proc.stopOnce.Do(func() {}) // stopped here; the cleanup has nothing left to do
	}
}

// -h prints the flags and exits 0, as for any command; a missing required flag is an error.
func TestHelpExitsZero(t *testing.T) {
	for _, bin := range []string{orderserverBin, consumerBin} {
		out, err := exec.Command(bin, "-h").CombinedOutput()
		require.NoError(t, err, "%s -h: %s", bin, out)
		require.Contains(t, string(out), "Usage of")
		require.NotContains(t, string(out), "help requested")
	}
	out, err := exec.Command(consumerBin).CombinedOutput()
	require.Error(t, err, "the consumer needs -endpoint, -secret and -api-key: %s", out)
}
