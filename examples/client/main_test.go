package main

import (
	"bytes"
	"context"
	"flag"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/examples/orderserver/server"
)

func TestClient(t *testing.T) {
	srv, err := server.New(server.Config{})
	require.NoError(t, err)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	creds, err := srv.IssueCredentials(context.Background(), apikey.Sandbox)
	require.NoError(t, err)

	var out, errOut bytes.Buffer
	err = run([]string{"-base-url", ts.URL, "-api-key", creds.APIKey, "-orders", "6", "-lose", "0.4", "-seed", "3"}, &out, &errOut)
	require.NoError(t, err, "stderr: %s", errOut.String())
	text := out.String()
	t.Log("\n" + text)

	require.Equal(t, 6, strings.Count(text, "order "), "one line per order")
	require.Contains(t, text, "response was lost", "with -lose some responses are lost…")
	require.Contains(t, text, "created (the answer is a replay", "…and the retry with the same key is answered with a replay")
	require.Contains(t, text, "same key again:")
	require.Contains(t, text, "(same order: true)")
	require.Contains(t, text, "same key, different body: 422 idempotency_key_reused")
	require.Equal(t, int64(6), srv.Stats().OrdersCreated, "six orders, whatever the retries")
}

func TestClientNeedsAKey(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Error(t, run(nil, &out, &errOut))
	require.Contains(t, errOut.String(), "-api-key")
}

func TestClientHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run([]string{"-h"}, &out, &errOut)
	require.ErrorIs(t, err, flag.ErrHelp, "main exits 0 on it")
	require.Contains(t, errOut.String(), "-seed")
	require.NotContains(t, errOut.String(), "(default 1", "no random number posing as the default seed")
}
