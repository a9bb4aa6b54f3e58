package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// The webhook portal (package portal on the server): a one-time link to the web page where the key's
// licensee manages its webhook endpoints.

// portalSessionJSON is the server's answer to POST /portal_sessions.
type portalSessionJSON struct {
	URL         string `json:"url"`
	ExpiresAt   int64  `json:"expires_at"`
	Environment string `json:"environment"`
}

func runPortal(ctx context.Context, e env, args []string) error {
	var (
		cm common
		m  mutation
	)
	f := newFlags(e, "svc portal", "[flags]", `
Print a fresh link to the webhook portal for the key's licensee and environment: the web page where
its webhook endpoints are registered, edited, disabled, deleted and their secrets rolled, deliveries
watched, events resent and ranges recovered, and, in the sandbox, faults injected and test events
sent. The portal does what the key may, no more. The link works once, for a few minutes: open it in
a browser, which keeps the session (an hour, or until you sign out). It is a credential: hand it to
no one else, and keep it out of logs and chats. Only the link is printed on stdout, so

  xdg-open "$(svc portal)"     # or: open "$(svc portal)" on macOS`)
	cm.register(f.FlagSet)
	m.register(f, "")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	_, c, err := apiClient(e, cm)
	if err != nil {
		return err
	}
	resp, err := m.send(ctx, e, c, http.MethodPost, "/portal_sessions", nil)
	if err != nil {
		return err
	}
	if secretOmitted(resp) {
		return fmt.Errorf("a link was minted by the first request with Idempotency-Key %s, but the server does not keep answers that carry a secret, so it cannot be shown again: run 'svc portal' without --idempotency-key for a new one (the old link expires unused)", m.key)
	}
	if m.jsonOut {
		return printJSON(e.stdout, resp.body)
	}
	var s portalSessionJSON
	if err := resp.decode(&s); err != nil {
		return err
	}
	if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" ||
		strings.ContainsAny(s.URL, " \t\r\n") {
		return fmt.Errorf("the server's answer is not a link: %q", clean(s.URL))
	}
	fmt.Fprintf(e.stderr, "svc: a one-time link to the %s webhook portal, valid until %s: open it in a browser; it is a credential, share it with no one\n",
		clean(s.Environment), unixTime(&s.ExpiresAt))
	fmt.Fprintln(e.stdout, s.URL)
	return nil
}
