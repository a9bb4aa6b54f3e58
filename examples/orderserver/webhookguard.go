package main

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/ssrf"
)

// EnvWebhookAllow names the environment variable that opens the webhook delivery guards, one per
// environment: semicolon-separated groups "<environment>=<entries>", the environment sandbox or live,
// the entries comma-separated. A group without "<environment>=" is the sandbox's. For a sandbox
// whose consumers run on the same machine:
//
//	SVC_WEBHOOK_ALLOW="sandbox=127.0.0.0/8,::1/128,localhost"
//
// and, where production's consumers are on a private network the operator trusts:
//
//	SVC_WEBHOOK_ALLOW="sandbox=127.0.0.1:9090,localhost:9090;live=hooks.corp:443,10.1.2.3:443"
//
// An entry is a CIDR prefix (any port), an IP address (any port), an address with a port
// (127.0.0.1:9090, [::1]:9090: that port only), or a host name, alone or with a port, that
// registration accepts although it is a local-use name (localhost, *.internal). A name opens no
// address: deliveries to it still connect only to addresses its environment's entries allow, so list
// them too. Unset or empty: deliveries reach public unicast addresses only, in both environments.
const EnvWebhookAllow = "SVC_WEBHOOK_ALLOW"

// webhookGuards builds the delivery guards of the sandbox and of production from list (the value of
// EnvWebhookAllow). A prefix must be written with its host bits zero (10.1.0.0/16, not 10.1.2.3/16):
// an allow-list entry that opens more than it appears to is refused rather than guessed at. A bad
// entry is an error that names its environment, its position and the entry. nil means the default
// guard.
func webhookGuards(list string, logger *slog.Logger) (sandboxGuard, liveGuard *ssrf.Guard, err error) {
	guards := map[apikey.Environment]*ssrf.Guard{}
	for group := range strings.SplitSeq(list, ";") {
		group = strings.TrimSpace(group)
		if group == "" {
			continue
		}
		env, entries := apikey.Sandbox, group
		if name, rest, ok := strings.Cut(group, "="); ok {
			env, entries = apikey.Environment(strings.TrimSpace(name)), rest
			if !env.Valid() {
				return nil, nil, fmt.Errorf("%s: group %q: the environment must be sandbox or live, as in sandbox=127.0.0.0/8;live=10.1.2.3:443",
					EnvWebhookAllow, group)
			}
		}
		if guards[env] != nil {
			return nil, nil, fmt.Errorf("%s: the %s environment is named twice; list its entries in one group", EnvWebhookAllow, env)
		}
		g, err := webhookGuard(entries)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %s %w", EnvWebhookAllow, env, err)
		}
		guards[env] = g
	}
	for _, env := range []apikey.Environment{apikey.Sandbox, apikey.Live} {
		g := guards[env]
		if g == nil {
			continue
		}
		if len(g.Allow) == 0 && len(g.AllowAddrPorts) == 0 && len(g.AllowHosts) == 0 {
			guards[env] = nil
			continue
		}
		logger.Warn("webhook deliveries of "+string(env)+" keys may reach non-public addresses ("+EnvWebhookAllow+")",
			"allow", fmt.Sprint(g.Allow), "allow_addr_ports", fmt.Sprint(g.AllowAddrPorts),
			"allow_hosts", strings.Join(g.AllowHosts, ","))
	}
	return guards[apikey.Sandbox], guards[apikey.Live], nil
}

// webhookGuard builds one environment's guard from its comma-separated entries.
func webhookGuard(entries string) (*ssrf.Guard, error) {
	var g ssrf.Guard
	i := 0
	for entry := range strings.SplitSeq(entries, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		i++
		bad := func(format string, args ...any) error {
			return fmt.Errorf("entry %d %q "+format, append([]any{i, entry}, args...)...)
		}
		if strings.Contains(entry, "/") {
			p, err := netip.ParsePrefix(entry)
			if err != nil {
				return nil, bad("is not a CIDR prefix such as 127.0.0.0/8 or ::1/128 (a prefix opens every port; name one address to open one port)")
			}
			if p != p.Masked() {
				return nil, bad("has host bits set: write %s for the network, or %s for the one address",
					p.Masked(), netip.PrefixFrom(p.Addr(), p.Addr().BitLen()))
			}
			g.Allow = append(g.Allow, p)
			continue
		}
		if a, err := netip.ParseAddr(entry); err == nil {
			if a.Zone() != "" {
				return nil, bad("has an IPv6 zone, which the guard does not match")
			}
			g.Allow = append(g.Allow, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		if ap, err := netip.ParseAddrPort(entry); err == nil {
			switch {
			case ap.Addr().Zone() != "":
				return nil, bad("has an IPv6 zone, which the guard does not match")
			case ap.Port() == 0:
				return nil, bad("has port 0; ports are 1–65535")
			}
			g.AllowAddrPorts = append(g.AllowAddrPorts, ap)
			continue
		}
		name, port, hasPort := strings.Cut(entry, ":")
		if hasPort {
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
				return nil, bad("has a port outside 1–65535 (an IPv6 address with a port goes in brackets: [::1]:9090)")
			}
		}
		if !validHostName(name) {
			return nil, bad("is neither a CIDR prefix, an IP address (with or without a port) nor a host name (with or without a port)")
		}
		g.AllowHosts = append(g.AllowHosts, entry)
	}
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
