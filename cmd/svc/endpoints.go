package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/svcplatform/conventions/idempotency"
)

// The webhook endpoint lifecycle: create, list, get, update, disable, enable, delete, roll-secret,
// and the event catalogue an endpoint's enabled_events names types from.

// endpointJSON is a webhook endpoint as the server sends it; the secret only when it is new.
type endpointJSON struct {
	ID                      string            `json:"id"`
	URL                     string            `json:"url"`
	APIVersion              string            `json:"api_version"`
	Description             string            `json:"description"`
	EnabledEvents           []string          `json:"enabled_events"`
	Metadata                map[string]string `json:"metadata"`
	Headers                 map[string]string `json:"headers"`
	Status                  string            `json:"status"`
	DisabledReason          *string           `json:"disabled_reason"`
	DisabledAt              *int64            `json:"disabled_at"`
	Created                 *int64            `json:"created"`
	PreviousSecretExpiresAt *int64            `json:"previous_secret_expires_at"`
	RateLimit               *int              `json:"rate_limit"`
	FailingSince            *int64            `json:"failing_since"`
	Secret                  string            `json:"secret,omitempty"`
}

// endpointSettings are the flags that set an endpoint's settings, which create and update share.
// The endpoint's own API version is --endpoint-api-version: --api-version is every command's version
// segment, the one the key's licensee is pinned to, and an endpoint may receive its events at another.
type endpointSettings struct {
	url, description, events, apiVersion, rateLimit string
	metadata, headers                               pairsFlag
}

func (s *endpointSettings) register(f *flags, urlUsage string) {
	f.StringVar(&s.url, "url", "", urlUsage)
	f.StringVar(&s.description, "description", "", "what the endpoint is for, for people")
	f.StringVar(&s.events, "events", "", "the event types it receives, comma-separated, or '*' (quoted: the shell expands it) for every type ('svc event-types' lists them)")
	f.StringVar(&s.apiVersion, "endpoint-api-version", "", "the API version its events are rendered at (default: the key's licensee's pinned version)")
	f.StringVar(&s.rateLimit, "rate-limit", "", "the most deliveries a second it receives, or 'none' (the default) for no limit")
	s.metadata = pairsFlag{flag: "metadata"}
	s.headers = pairsFlag{flag: "header", fold: true}
	f.Var(&s.metadata, "metadata", "a `key=value` pair of yours, kept with the endpoint; key= removes the key (repeatable)")
	f.Var(&s.headers, "header", "a `Name=Value` header sent with every delivery; Name= removes it (repeatable; a value on the command line is visible to other users of the machine: no credentials)")
}

// body is the request body of the settings given on the command line, and nothing else: an update
// changes only what it names.
func (s *endpointSettings) body(f *flags) (map[string]any, error) {
	body := map[string]any{}
	var err error
	f.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "url":
			body["url"] = s.url
		case "description":
			body["description"] = s.description
		case "endpoint-api-version":
			body["api_version"] = s.apiVersion
		case "rate-limit":
			if s.rateLimit == "none" {
				body["rate_limit"] = nil
				return
			}
			n, perr := strconv.Atoi(s.rateLimit)
			if perr != nil || n < 1 {
				err = usagef("%s: --rate-limit wants a number of deliveries a second of at least 1, or 'none'", f.Name())
				return
			}
			body["rate_limit"] = n
		case "events":
			var types []string
			for t := range strings.SplitSeq(s.events, ",") {
				if t = strings.TrimSpace(t); t != "" {
					types = append(types, t)
				}
			}
			if len(types) == 0 {
				err = usagef("%s: --events needs at least one event type, or '*' for every type", f.Name())
			}
			body["enabled_events"] = types
		}
	})
	if len(s.metadata.m) > 0 {
		body["metadata"] = s.metadata.m
	}
	if len(s.headers.m) > 0 {
		body["headers"] = s.headers.m
	}
	return body, err
}

// pairsFlag collects a repeatable name=value flag into a JSON merge patch member: "name=" is null,
// which removes the name.
type pairsFlag struct {
	flag string
	fold bool // names are HTTP header names, the same in any case
	m    map[string]*string
}

func (p *pairsFlag) String() string { return "" }

// Set refuses what cannot be meant: no "=", an empty name, a name given twice. The error names only
// the name, never the value (a header's value may be a token).
func (p *pairsFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok {
		return errors.New("want NAME=VALUE (or NAME= to remove NAME), with the '='")
	}
	if name == "" {
		return errors.New("want NAME=VALUE: the name is empty")
	}
	for k := range p.m {
		if k == name || p.fold && strings.EqualFold(k, name) {
			return fmt.Errorf("%q is given twice", name)
		}
	}
	if p.m == nil {
		p.m = map[string]*string{}
	}
	p.m[name] = nil
	if value != "" {
		p.m[name] = &value
	}
	return nil
}

// removals are the names the flag removes.
func (p *pairsFlag) removals() []string {
	var out []string
	for k, v := range p.m {
		if v == nil {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func runEndpointsCreate(ctx context.Context, e env, args []string) error {
	var (
		cm common
		m  mutation
		s  endpointSettings
	)
	f := newFlags(e, "svc endpoints create", "--url URL [--description D] [--events TYPE,…|'*'] [--endpoint-api-version V] [--rate-limit N|none] [--metadata K=V]… [--header NAME=VALUE]… [flags]", `
Register a webhook endpoint for the key's licensee and print its ID and signing secret. The secret
is shown once: keep it (SVC_WEBHOOK_SECRET) — listen, events and verify need it. The events it
subscribes to (every type unless --events names some) are then delivered to the URL, and kept in the
endpoint's stream for range retrieval, so an endpoint that 'svc listen' follows needs no reachable
URL at all.

  eval "$(svc endpoints create --url https://example.com/hooks --export)"   # sets SVC_ENDPOINT and SVC_WEBHOOK_SECRET
  svc endpoints create --url https://example.com/hooks --events order.created,order.filled --metadata team=payments`)
	cm.register(f.FlagSet)
	m.register(f, "SVC_ENDPOINT and SVC_WEBHOOK_SECRET")
	s.register(f, "where the platform delivers the events (required)")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	if s.url == "" {
		return usagef("svc endpoints create: --url is required")
	}
	body, err := s.body(f)
	if err != nil {
		return err
	}
	for _, p := range []*pairsFlag{&s.metadata, &s.headers} {
		if r := p.removals(); len(r) > 0 {
			return usagef("svc endpoints create: --%s %s= removes %s, and a new endpoint has none to remove", p.flag, r[0], r[0])
		}
	}
	_, c, err := apiClient(e, cm)
	if err != nil {
		return err
	}
	resp, err := m.send(ctx, e, c, http.MethodPost, "/webhook_endpoints", body)
	if err != nil {
		return err
	}
	if secretOmitted(resp) {
		// The Location header is replayed: it names the endpoint whose secret was lost.
		roll := "find it with 'svc endpoints list' and roll its secret (svc endpoints roll-secret)"
		if id := path.Base(resp.header.Get("Location")); checkEndpointID(id) == nil {
			roll = "roll its secret (svc endpoints roll-secret --endpoint " + id + ")"
		}
		return fmt.Errorf("the endpoint was created by the first request with Idempotency-Key %s, but the server does not keep answers that carry a secret, so its secret cannot be shown again: %s to get one you can see",
			m.key, roll)
	}
	if m.jsonOut {
		return printJSON(e.stdout, resp.body)
	}
	var ep endpointJSON
	if err := resp.decode(&ep); err != nil {
		return err
	}
	if m.exportTo {
		fmt.Fprintf(e.stdout, "export %s=%s\nexport %s=%s\n", envEndpoint, shellQuote(ep.ID), envSecret, shellQuote(ep.Secret))
		return nil
	}
	fmt.Fprintf(e.stdout, "webhook endpoint %s created%s\n", clean(ep.ID), replayNote(resp))
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	endpointRows(tw, &ep)
	if ep.Secret != "" {
		fmt.Fprintf(tw, "  secret\t%s\t(shown once: keep it as %s)\n", clean(ep.Secret), envSecret)
	}
	return tw.Flush()
}

func runEndpointsList(ctx context.Context, e env, args []string) error {
	var (
		cm      common
		jsonOut bool
	)
	f := newFlags(e, "svc endpoints list", "[flags]", `
List the webhook endpoints of the key's licensee, in this environment, oldest first. Their secrets
are not shown: each was shown once, when it was created or rolled. 'svc endpoints get' shows one
endpoint's settings.`)
	cm.register(f.FlagSet)
	f.BoolVar(&jsonOut, "json", false, "print the server's answer as JSON")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	_, c, err := apiClient(e, cm)
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodGet, "/webhook_endpoints", nil, "")
	if err != nil {
		return err
	}
	if jsonOut {
		return printJSON(e.stdout, resp.body)
	}
	var list struct {
		Data []endpointJSON `json:"data"`
	}
	if err := resp.decode(&list); err != nil {
		return err
	}
	if len(list.Data) == 0 {
		fmt.Fprintln(e.stdout, "no webhook endpoints (svc endpoints create --url …)")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAPI VERSION\tURL")
	for _, ep := range list.Data {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", clean(ep.ID), clean(ep.APIVersion), clean(ep.URL))
	}
	return tw.Flush()
}

func runEndpointsGet(ctx context.Context, e env, args []string) error {
	var (
		cm       common
		endpoint string
		jsonOut  bool
	)
	f := newFlags(e, "svc endpoints get", "[--endpoint we_…] [flags]", `
Show a webhook endpoint's settings: its URL, API version, status (and why and since when it is
disabled), the event types it receives, its description, metadata and headers, when it was created,
and, while a rolled secret's old one still signs, until when. Its secret is not shown: it was shown
once, when it was created or rolled.`)
	cm.register(f.FlagSet)
	f.StringVar(&endpoint, "endpoint", "", "the endpoint, we_… (default $"+envEndpoint+")")
	f.BoolVar(&jsonOut, "json", false, "print the server's answer as JSON")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	cfg, key, endpoint, err := endpointCommand(e, cm, endpoint)
	if err != nil {
		return err
	}
	resp, err := newClient(cfg, key).do(ctx, http.MethodGet, "/webhook_endpoints/"+endpoint, nil, "")
	if err != nil {
		return err
	}
	return printEndpoint(e.stdout, resp, jsonOut, "")
}

func runEndpointsUpdate(ctx context.Context, e env, args []string) error {
	var (
		cm       common
		m        mutation
		endpoint string
		s        endpointSettings
	)
	f := newFlags(e, "svc endpoints update", "[--endpoint we_…] [--url U] [--description D] [--events TYPE,…|'*'] [--endpoint-api-version V] [--rate-limit N|none] [--metadata K=V]… [--header NAME=VALUE]… [flags]", `
Change a webhook endpoint's settings: only those given change (a JSON merge patch). --metadata and
--header add or replace one pair each and leave the others; KEY= removes one. A new URL, and every
other change, applies from the next delivery, on every replica of the server. The secret does not
change ('svc endpoints roll-secret'), nor does the status ('svc endpoints disable' and 'enable').

  svc endpoints update --events order.created,order.filled --metadata team=payments --metadata old=`)
	cm.register(f.FlagSet)
	m.register(f, "")
	f.StringVar(&endpoint, "endpoint", "", "the endpoint, we_… (default $"+envEndpoint+")")
	s.register(f, "where the platform delivers the events")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	body, err := s.body(f)
	if err != nil {
		return err
	}
	if len(body) == 0 {
		return usagef("svc endpoints update: nothing to change: give --url, --description, --events, --endpoint-api-version, --rate-limit, --metadata or --header")
	}
	return patchEndpoint(ctx, e, cm, &m, endpoint, body, "updated", "")
}

func runEndpointsDisable(ctx context.Context, e env, args []string) error {
	return setEndpointStatus(ctx, e, args, "disable", `
Disable a webhook endpoint: nothing is delivered to its URL until it is enabled again. Its events are
still numbered and kept, so 'svc listen' and 'svc events' go on reading them by range, and the first
delivery after 'svc endpoints enable' shows the receiver the gap to fetch. Disabling an endpoint the
server disabled already keeps the server's reason and time.`)
}

func runEndpointsEnable(ctx context.Context, e env, args []string) error {
	return setEndpointStatus(ctx, e, args, "enable", `
Enable a webhook endpoint again, however it was disabled (by you, or by the server's delivery-health
checks): deliveries resume with the next event. The events of the time it was disabled are not
pushed; the receiver sees the gap in the sequence and fetches them by range.`)
}

// setEndpointStatus is disable and enable: a PATCH of the status alone.
func setEndpointStatus(ctx context.Context, e env, args []string, verb, about string) error {
	var (
		cm       common
		m        mutation
		endpoint string
	)
	f := newFlags(e, "svc endpoints "+verb, "[--endpoint we_…] [flags]", about)
	cm.register(f.FlagSet)
	m.register(f, "")
	f.StringVar(&endpoint, "endpoint", "", "the endpoint, we_… (default $"+envEndpoint+")")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	note := ": deliveries resume with the next event"
	if verb == "disable" {
		note = ": nothing is delivered until 'svc endpoints enable'; its events are still kept, for 'svc listen' and 'svc events'"
	}
	return patchEndpoint(ctx, e, cm, &m, endpoint, map[string]string{"status": verb + "d"}, verb+"d", note)
}

// patchEndpoint sends an update and prints the endpoint as it now is.
func patchEndpoint(ctx context.Context, e env, cm common, m *mutation, endpoint string, body any, done, note string) error {
	cfg, key, endpoint, err := endpointCommand(e, cm, endpoint)
	if err != nil {
		return err
	}
	resp, err := m.send(ctx, e, newClient(cfg, key), http.MethodPatch, "/webhook_endpoints/"+endpoint, body)
	if err != nil {
		return err
	}
	return printEndpoint(e.stdout, resp, m.jsonOut, " "+done+note+replayNote(resp))
}

func runEndpointsDelete(ctx context.Context, e env, args []string) error {
	var (
		cm       common
		m        mutation
		endpoint string
	)
	f := newFlags(e, "svc endpoints delete", "[--endpoint we_…] [flags]", `
Delete a webhook endpoint, for good: it receives no more events and no more deliveries, and it no
longer counts towards the licensee's endpoints. The events it has stay readable by range ('svc
events', 'svc listen') until the server's retention removes them.`)
	cm.register(f.FlagSet)
	m.register(f, "")
	f.StringVar(&endpoint, "endpoint", "", "the endpoint, we_… (default $"+envEndpoint+")")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	cfg, key, endpoint, err := endpointCommand(e, cm, endpoint)
	if err != nil {
		return err
	}
	resp, err := m.send(ctx, e, newClient(cfg, key), http.MethodDelete, "/webhook_endpoints/"+endpoint, nil)
	if err != nil {
		return err
	}
	if m.jsonOut {
		return printJSON(e.stdout, resp.body)
	}
	var out struct {
		ID      string `json:"id"`
		Deleted bool   `json:"deleted"`
	}
	if err := resp.decode(&out); err != nil {
		return err
	}
	if !out.Deleted {
		return fmt.Errorf("the server's answer does not say that %s was deleted", endpoint)
	}
	fmt.Fprintf(e.stdout, "webhook endpoint %s deleted%s: no more events or deliveries; the events it has stay readable by range ('svc events', 'svc listen') until the server's retention removes them\n",
		clean(out.ID), replayNote(resp))
	return nil
}

func runEndpointsRollSecret(ctx context.Context, e env, args []string) error {
	var (
		cm        common
		m         mutation
		endpoint  string
		expiresIn time.Duration
	)
	f := newFlags(e, "svc endpoints roll-secret", "[--endpoint we_…] [--expires-in DURATION] [--export] [flags]", `
Give a webhook endpoint a new signing secret, and print it: it is shown once. The old secret keeps
signing beside it for --expires-in: until then every delivery and every range page carries two v1
signatures, one per secret, so receivers (and 'svc listen') that hold the old secret keep verifying
while you give them the new one. --expires-in 0s ends the old secret at once. Only the newest old
secret stays: rolling again before it expires stops the one before it at once.

  eval "$(svc endpoints roll-secret --export)"   # sets SVC_WEBHOOK_SECRET to the new secret`)
	cm.register(f.FlagSet)
	m.register(f, "SVC_WEBHOOK_SECRET")
	f.StringVar(&endpoint, "endpoint", "", "the endpoint, we_… (default $"+envEndpoint+")")
	f.DurationVar(&expiresIn, "expires-in", 0, "how long the old secret keeps signing, such as 24h or 0s (default: the server's, 24h; at most 168h)")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	var body any
	given := false
	f.Visit(func(fl *flag.Flag) { given = given || fl.Name == "expires-in" })
	if given {
		if expiresIn < 0 || expiresIn%time.Second != 0 {
			return usagef("svc endpoints roll-secret: --expires-in %s must be whole seconds, 0s or more: 0s ends the old secret at once", expiresIn)
		}
		body = map[string]int64{"expires_in": int64(expiresIn / time.Second)}
	}
	cfg, key, endpoint, err := endpointCommand(e, cm, endpoint)
	if err != nil {
		return err
	}
	resp, err := m.send(ctx, e, newClient(cfg, key), http.MethodPost, "/webhook_endpoints/"+endpoint+"/roll_secret", body)
	if err != nil {
		return err
	}
	if secretOmitted(resp) {
		return fmt.Errorf("the secret of %s was rolled by the first request with Idempotency-Key %s, but the server does not keep answers that carry a secret, so the new one cannot be shown again. "+
			"Rolling again gives one you can see, and ends at once the secret receivers hold now (only the newest old secret keeps signing)", endpoint, m.key)
	}
	if m.jsonOut {
		return printJSON(e.stdout, resp.body)
	}
	var ep endpointJSON
	if err := resp.decode(&ep); err != nil {
		return err
	}
	if ep.Secret == "" {
		return fmt.Errorf("the server's answer carries no secret")
	}
	if m.exportTo {
		fmt.Fprintf(e.stdout, "export %s=%s\n", envSecret, shellQuote(ep.Secret))
		return nil
	}
	fmt.Fprintf(e.stdout, "webhook endpoint %s: secret rolled%s\n", clean(ep.ID), replayNote(resp))
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  secret\t%s\t(shown once: keep it as %s)\n", clean(ep.Secret), envSecret)
	if ep.PreviousSecretExpiresAt != nil {
		fmt.Fprintf(tw, "  old secret\tsigns too until %s\t(until then deliveries and range pages carry both signatures: receivers holding the old secret keep verifying; give them the new one before then)\n",
			unixTime(ep.PreviousSecretExpiresAt))
	} else {
		fmt.Fprintf(tw, "  old secret\tno longer signs\t(receivers holding it fail verification from now on: give them the new one)\n")
	}
	return tw.Flush()
}

// secretOmitted reports a replayed answer whose body — a secret, shown once — the server did not keep.
func secretOmitted(resp *response) bool {
	return resp.header.Get(idempotency.HeaderBodyOmitted) == "true" && len(strings.TrimSpace(string(resp.body))) == 0
}

// printEndpoint prints the endpoint answered: "webhook endpoint we_…" and what, then its settings.
func printEndpoint(w io.Writer, resp *response, jsonOut bool, what string) error {
	if jsonOut {
		return printJSON(w, resp.body)
	}
	var ep endpointJSON
	if err := resp.decode(&ep); err != nil {
		return err
	}
	fmt.Fprintf(w, "webhook endpoint %s%s\n", clean(ep.ID), what)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	endpointRows(tw, &ep)
	return tw.Flush()
}

// endpointRows writes an endpoint's settings, a "  name\tvalue" row each; a map's pairs take a row
// each, in the order of their names.
func endpointRows(w io.Writer, ep *endpointJSON) {
	fmt.Fprintf(w, "  url\t%s\n  api version\t%s\n", clean(ep.URL), clean(ep.APIVersion))
	status := clean(ep.Status)
	if ep.DisabledReason != nil {
		status += " (" + clean(*ep.DisabledReason)
		if ep.DisabledAt != nil {
			status += ", since " + unixTime(ep.DisabledAt)
		}
		status += ")"
	}
	fmt.Fprintf(w, "  status\t%s\n", status)
	if ep.FailingSince != nil {
		fmt.Fprintf(w, "  failing since\t%s (deliveries fail; it is disabled if they keep failing)\n", unixTime(ep.FailingSince))
	}
	rate := "none"
	if ep.RateLimit != nil {
		rate = strconv.Itoa(*ep.RateLimit) + " deliveries a second"
	}
	fmt.Fprintf(w, "  rate limit\t%s\n", rate)
	events := "* (every type)"
	if len(ep.EnabledEvents) > 0 && !(len(ep.EnabledEvents) == 1 && ep.EnabledEvents[0] == "*") {
		events = clean(strings.Join(ep.EnabledEvents, ", "))
	}
	fmt.Fprintf(w, "  events\t%s\n", events)
	fmt.Fprintf(w, "  description\t%s\n", orNone(clean(ep.Description)))
	mapRows(w, "metadata", ep.Metadata, "=")
	mapRows(w, "headers", ep.Headers, ": ")
	created := "unknown"
	if ep.Created != nil {
		created = unixTime(ep.Created)
	}
	fmt.Fprintf(w, "  created\t%s\n", created)
	if ep.PreviousSecretExpiresAt != nil {
		fmt.Fprintf(w, "  previous secret\tsigns too until %s (deliveries carry both signatures until then)\n", unixTime(ep.PreviousSecretExpiresAt))
	}
}

func mapRows(w io.Writer, name string, m map[string]string, sep string) {
	if len(m) == 0 {
		fmt.Fprintf(w, "  %s\tnone\n", name)
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			name = ""
		}
		fmt.Fprintf(w, "  %s\t%s%s%s\n", name, clean(k), sep, clean(m[k]))
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// unixTime is a Unix time of the server's, in UTC.
func unixTime(t *int64) string { return time.Unix(*t, 0).UTC().Format(time.RFC3339) }

// ---- event types

func runEventTypes(ctx context.Context, e env, args []string) error {
	var (
		cm      common
		jsonOut bool
	)
	f := newFlags(e, "svc event-types", "[flags]", `
List the event types the server declares, with what each means: the types an endpoint's --events
may name ('*' is every type, those added later included).`)
	cm.register(f.FlagSet)
	f.BoolVar(&jsonOut, "json", false, "print the server's answer as JSON")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	_, c, err := apiClient(e, cm)
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodGet, "/event_types", nil, "")
	if err != nil {
		return err
	}
	if jsonOut {
		return printJSON(e.stdout, resp.body)
	}
	var list struct {
		Data []struct {
			Type        string `json:"type"`
			Description string `json:"description"`
		} `json:"data"`
	}
	if err := resp.decode(&list); err != nil {
		return err
	}
	if len(list.Data) == 0 {
		fmt.Fprintln(e.stdout, "the server declares no event types: --events may name any well-formed type")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tDESCRIPTION")
	for _, t := range list.Data {
		fmt.Fprintf(tw, "%s\t%s\n", clean(t.Type), clean(t.Description))
	}
	return tw.Flush()
}
