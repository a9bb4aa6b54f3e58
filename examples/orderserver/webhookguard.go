package main

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"

	"github.com/svcplatform/conventions/webhook/producer"
)

// EnvWebhookAllow names the environment variable that opens the webhook delivery guard: a
// comma-separated list of CIDR prefixes, IP addresses and host names that deliveries (and
// registration) may use although they are not public, such as
// SVC_WEBHOOK_ALLOW="127.0.0.0/8,::1/128,localhost" for a sandbox whose consumers run on the same
// machine. Unset or empty: deliveries reach public unicast addresses only.
const EnvWebhookAllow = "SVC_WEBHOOK_ALLOW"

// webhookGuard builds the delivery guard from list (the value of EnvWebhookAllow). A prefix must be
// written with its host bits zero (10.1.0.0/16, not 10.1.2.3/16): an allow-list entry that opens more
// than it appears to is refused rather than guessed at. An address alone allows that address; a host
// name is skipped by the dial-time check altogether, so name only hosts whose resolution you control.
// A bad entry is an error that names it. nil means the default guard.
func webhookGuard(list string, logger *slog.Logger) (*producer.AddressGuard, error) {
	var g producer.AddressGuard
	for entry := range strings.SplitSeq(list, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if strings.Contains(entry, "/") {
			p, err := netip.ParsePrefix(entry)
			if err != nil {
				return nil, fmt.Errorf("%s: entry %q is not a CIDR prefix such as 127.0.0.0/8 or ::1/128", EnvWebhookAllow, entry)
			}
			if p != p.Masked() {
				return nil, fmt.Errorf("%s: entry %q has host bits set: write %s for the network, or %s for the one address",
					EnvWebhookAllow, entry, p.Masked(), netip.PrefixFrom(p.Addr(), p.Addr().BitLen()))
			}
			g.Allow = append(g.Allow, p)
			continue
		}
		if a, err := netip.ParseAddr(entry); err == nil {
			if a.Zone() != "" {
				return nil, fmt.Errorf("%s: entry %q has an IPv6 zone, which the guard does not match", EnvWebhookAllow, entry)
			}
			g.Allow = append(g.Allow, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		if !validHostName(entry) {
			return nil, fmt.Errorf("%s: entry %q is neither a CIDR prefix, an IP address nor a host name", EnvWebhookAllow, entry)
		}
		g.AllowHosts = append(g.AllowHosts, entry)
	}
	if len(g.Allow) == 0 && len(g.AllowHosts) == 0 {
		return nil, nil
	}
	logger.Warn("webhook deliveries may reach non-public addresses ("+EnvWebhookAllow+")",
		"allow", fmt.Sprint(g.Allow), "allow_hosts", strings.Join(g.AllowHosts, ","))
	return &g, nil
}

// validHostName reports whether s is dot-separated labels of ASCII letters, digits, '-' and '_',
// each 1–63 bytes, at most 253 in all, with an optional trailing dot.
func validHostName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range []byte(label) {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
