package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook/webhooktest"
)

func TestVerify(t *testing.T) {
	const secret = "whsec_verify_test_secret"
	now := time.Now()
	ev := webhooktest.NewEvent(42, "order.created", map[string]any{"id": "ord_1"}, now)
	ev.Endpoint = "we_1"
	body := webhooktest.Body(ev)
	sig := webhooktest.Header(body, now, secret)
	vars := map[string]string{envSecret: secret}
	file := filepath.Join(t.TempDir(), "delivery.json")
	require.NoError(t, os.WriteFile(file, body, 0o600))

	t.Run("an authentic delivery, from stdin or a file, with its sequence and endpoint", func(t *testing.T) {
		r := runSvc(t, vars, string(body), "verify", "--signature", sig)
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "valid: signed with the secret at ")
		r = runSvc(t, vars, "", "verify", "--signature", sig, "--body", file, "--sequence", "42", "--endpoint", "we_1")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "valid: X-SVC-Sequence 42 matches the signed body")
		require.Contains(t, r.stdout, "valid: the signed body names endpoint we_1")
	})
	t.Run("any of several secrets during a rotation", func(t *testing.T) {
		r := runSvc(t, map[string]string{envSecret: "whsec_new, " + secret}, string(body), "verify", "--signature", sig)
		require.Equal(t, exitOK, r.code, r.stderr)
	})
	t.Run("every one-byte change of the body is refused, with the reason", func(t *testing.T) {
		for i := range body {
			changed := append([]byte(nil), body...)
			changed[i] ^= 0x01
			r := runSvc(t, vars, string(changed), "verify", "--signature", sig)
			require.Equal(t, exitInvalid, r.code, "byte %d", i)
			require.Contains(t, r.stderr, "no v1 signature matches the secret: the body is not byte for byte what was signed (stdin)")
		}
	})
	t.Run("a final newline the delivery did not have is named", func(t *testing.T) {
		r := runSvc(t, vars, string(body)+"\n", "verify", "--signature", sig)
		require.Equal(t, exitInvalid, r.code)
		require.Contains(t, r.stderr, `it does match without the body's final "\n"`)
	})
	t.Run("another secret", func(t *testing.T) {
		r := runSvc(t, map[string]string{envSecret: "whsec_other"}, string(body), "verify", "--signature", sig)
		require.Equal(t, exitInvalid, r.code)
		require.Contains(t, r.stderr, "or SVC_WEBHOOK_SECRET is not the endpoint's")
		require.NotContains(t, r.stderr, "whsec_other")
	})
	t.Run("too old, and the same capture checked as of when it arrived", func(t *testing.T) {
		old := now.Add(-time.Hour)
		oldSig := webhooktest.Header(body, old, secret)
		r := runSvc(t, vars, string(body), "verify", "--signature", oldSig)
		require.Equal(t, exitInvalid, r.code)
		require.Contains(t, r.stderr, "the signature is authentic, but it was made at ")
		require.Contains(t, r.stderr, "older than the 5m0s tolerance")
		r = runSvc(t, vars, string(body), "verify", "--signature", oldSig, "--at", strconv.FormatInt(old.Add(10*time.Second).Unix(), 10))
		require.Equal(t, exitOK, r.code, r.stderr)
		r = runSvc(t, vars, string(body), "verify", "--signature", oldSig, "--tolerance", "2h")
		require.Equal(t, exitOK, r.code, r.stderr)
	})
	t.Run("too new", func(t *testing.T) {
		r := runSvc(t, vars, string(body), "verify", "--signature", webhooktest.Header(body, now.Add(time.Hour), secret))
		require.Equal(t, exitInvalid, r.code)
		require.Contains(t, r.stderr, "further ahead than the 5m0s tolerance")
	})
	t.Run("a malformed header", func(t *testing.T) {
		for _, h := range []string{"v1=abc", "t=1,t=2,v1=" + sig[len(sig)-64:], "t=now,v1=00", "t=" + strconv.FormatInt(now.Unix(), 10)} {
			r := runSvc(t, vars, string(body), "verify", "--signature", h)
			require.Equal(t, exitInvalid, r.code, h)
			require.Contains(t, r.stderr, "the signature header is malformed", h)
		}
	})
	t.Run("a sequence header or endpoint that does not match the signed body", func(t *testing.T) {
		r := runSvc(t, vars, string(body), "verify", "--signature", sig, "--sequence", "43")
		require.Equal(t, exitInvalid, r.code)
		require.Contains(t, r.stderr, "X-SVC-Sequence 43 does not match the signed body's sequence 42")
		r = runSvc(t, vars, string(body), "verify", "--signature", sig, "--endpoint", "we_2")
		require.Equal(t, exitInvalid, r.code)
		require.Contains(t, r.stderr, `the signed body names endpoint "we_1", not we_2`)
	})
	t.Run("usage", func(t *testing.T) {
		r := runSvc(t, nil, string(body), "verify", "--signature", sig)
		require.Equal(t, exitUsage, r.code)
		require.Contains(t, r.stderr, "set SVC_WEBHOOK_SECRET")
		r = runSvc(t, vars, string(body), "verify", "--signature", sig, "--tolerance", "0s")
		require.Equal(t, exitUsage, r.code)
		r = runSvc(t, vars, string(body), "verify", "--signature", sig, "--at", "yesterday")
		require.Equal(t, exitUsage, r.code)
		r = runSvc(t, vars, "", "verify", "--signature", sig, "--body", filepath.Join(t.TempDir(), "none"))
		require.Equal(t, exitUsage, r.code)
	})
}
