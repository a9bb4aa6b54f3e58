package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/svcplatform/conventions/idempotency"
)

// mutation are the flags of a command that changes something: the Idempotency-Key it sends (and
// retries on), and how it prints the answer.
type mutation struct {
	key      string
	jsonOut  bool
	exportTo bool
}

func (m *mutation) register(f *flags, export string) {
	f.StringVar(&m.key, "idempotency-key", "", "the Idempotency-Key to send: the key of an earlier attempt replays its answer instead of doing it again (default: a fresh UUID, printed)")
	f.BoolVar(&m.jsonOut, "json", false, "print the server's answer as JSON")
	if export != "" {
		f.BoolVar(&m.exportTo, "export", false, "print "+export+" as shell assignments, for eval \"$(svc …)\"")
	}
}

// send posts a mutating request with the command's key, and says which key it was when the answer
// is lost, so the very same request can be sent again without doing the work twice.
func (m *mutation) send(ctx context.Context, e env, c *client, method, path string, body any) (*response, error) {
	if err := m.checkKey(); err != nil {
		return nil, err
	}
	if m.key == "" {
		m.key = idempotency.NewKey()
	}
	resp, err := c.do(ctx, method, path, body, m.key)
	var pe *problemError
	if err != nil && (!errors.As(err, &pe) || pe.retryable()) {
		// The answer was lost or is not final: the same key finds out what happened.
		fmt.Fprintf(e.stderr, "svc: the request was sent with Idempotency-Key %s: send it again with --idempotency-key %s to replay its answer, never to do it twice\n", m.key, m.key)
	}
	return resp, err
}

// checkKey refuses an --idempotency-key no server takes, for a command that checks it before sending
// anything at all (send checks it too).
func (m *mutation) checkKey() error {
	if m.key != "" && !idempotency.ValidKey(m.key) {
		return usagef("--idempotency-key must be 1 to 255 visible ASCII characters")
	}
	return nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func replayNote(r *response) string {
	if r.header.Get(idempotency.HeaderReplayed) == "true" {
		return " (replayed: this key was used before; nothing was done a second time)"
	}
	return ""
}

// ---- trigger

func runTrigger(ctx context.Context, e env, args []string) error {
	var (
		cm       common
		m        mutation
		endpoint string
		data     string
	)
	f := newFlags(e, "svc trigger", "[event-type] [flags]", `
Trigger a test event in the sandbox, through the normal delivery path: it is delivered to the
endpoints (with their faults) and kept in their event streams, so 'svc listen' forwards it too.
The event type defaults to the server's test type (sandbox.test); order.created is a good one to try.
Sandbox keys only: a production key is answered like an unknown route.

  svc trigger order.created --endpoint we_… --data '{"id":"ord_test","account":"acc_1"}'`)
	cm.register(f.FlagSet)
	m.register(f, "")
	f.StringVar(&endpoint, "endpoint", "", "only this endpoint, we_… (default $"+envEndpoint+"; without either, every endpoint of the key's licensee)")
	f.StringVar(&data, "data", "", "the event's data, a JSON object (default {})")
	if err := f.parse(args, 1); err != nil {
		return err
	}
	cfg, c, err := apiClient(e, cm)
	if err != nil {
		return err
	}
	if endpoint == "" {
		endpoint = cfg.Endpoint
	}
	body := map[string]any{}
	if t := f.arg(0); t != "" {
		body["type"] = t
	}
	if endpoint != "" {
		body["endpoint"] = endpoint
	}
	if data != "" {
		if !json.Valid([]byte(data)) {
			return usagef("--data is not valid JSON")
		}
		body["data"] = json.RawMessage(data)
	}
	resp, err := m.send(ctx, e, c, http.MethodPost, "/sandbox/events", body)
	if err != nil {
		return err
	}
	if m.jsonOut {
		return printJSON(e.stdout, resp.body)
	}
	var out struct {
		Data []struct {
			Endpoint string `json:"endpoint"`
			Event    struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Sequence uint64 `json:"sequence"`
			} `json:"event"`
		} `json:"data"`
	}
	if err := resp.decode(&out); err != nil {
		return err
	}
	if len(out.Data) == 0 {
		fmt.Fprintln(e.stdout, "no event triggered: the key's licensee has no webhook endpoint (svc endpoints create)")
	}
	for _, t := range out.Data {
		seq := "sequence " + strconv.FormatUint(t.Event.Sequence, 10)
		if t.Event.Sequence == 0 {
			seq = "sequence assigned when it commits"
		}
		fmt.Fprintf(e.stdout, "triggered %s %s on %s (%s)%s\n", clean(t.Event.Type), clean(t.Event.ID), clean(t.Endpoint), seq, replayNote(resp))
	}
	return nil
}

// ---- orders

func runOrdersCreate(ctx context.Context, e env, args []string) error {
	var (
		cm      common
		m       mutation
		account string
		side    string
		data    string
	)
	f := newFlags(e, "svc orders create", "--account ACCOUNT [--side buy|sell] [flags]", `
Create an order on the reference order server. The request carries an Idempotency-Key, printed
with the answer: a request whose answer was lost is retried on the same key (network errors, 409,
429, 5xx), and sending it again with --idempotency-key replays the first answer — never a second order.
The side is sent as "side" under v1 and as "direction" under v2 and later, the member's name in
each version; --data sends a body of your own instead.`)
	cm.register(f.FlagSet)
	m.register(f, "")
	f.StringVar(&account, "account", "", "the order's account, 1-64 of [A-Za-z0-9_-]")
	f.StringVar(&side, "side", "buy", "buy or sell")
	f.StringVar(&data, "data", "", "the request body, a JSON object, instead of --account and --side")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	cfg, c, err := apiClient(e, cm)
	if err != nil {
		return err
	}
	var body any
	switch {
	case data != "":
		if !json.Valid([]byte(data)) {
			return usagef("--data is not valid JSON")
		}
		body = json.RawMessage(data)
	case account == "":
		return usagef("svc orders create: --account is required (or --data)")
	default:
		member := "direction"
		if cfg.APIVersion == "v1" {
			member = "side"
		}
		body = map[string]string{"account": account, member: side}
	}
	resp, err := m.send(ctx, e, c, http.MethodPost, "/orders", body)
	if err != nil {
		return err
	}
	if m.jsonOut {
		return printJSON(e.stdout, resp.body)
	}
	var o map[string]any
	if err := resp.decode(&o); err != nil {
		return err
	}
	dir := o["side"]
	if dir == nil {
		dir = o["direction"]
	}
	str := func(v any) string { return clean(fmt.Sprint(v)) }
	fmt.Fprintf(e.stdout, "order %s created: %s %s, status %s%s\n", str(o["id"]), str(dir), str(o["account"]), str(o["status"]), replayNote(resp))
	fmt.Fprintf(e.stdout, "idempotency key %s (send it again with --idempotency-key to replay this answer)\n", m.key)
	return nil
}

// ---- faults

func runFaultsSet(ctx context.Context, e env, args []string) error {
	var (
		cm                                      common
		m                                       mutation
		endpoint                                string
		drop, duplicate, reorder, delay, badSig float64
		delayMS                                 int
	)
	f := newFlags(e, "svc faults set", "--endpoint we_… [--drop R] [--duplicate R] [--reorder R] [--bad-signature R] [--delay R --delay-ms MS]", `
Inject webhook faults on one of your sandbox endpoints, to prove that a consumer recovers: each
rate is the share of deliveries, from 0 to 1, that are dropped, sent twice, held back behind the
next, delayed or signed wrongly. Rates not given are 0; the call replaces the endpoint's faults.
Deliveries change; the event stream does not: 'svc listen' and 'svc events' read the stream by
range retrieval and see every event once, in order. Sandbox keys only.`)
	cm.register(f.FlagSet)
	m.register(f, "")
	f.StringVar(&endpoint, "endpoint", "", "the endpoint, we_… (default $"+envEndpoint+")")
	f.Float64Var(&drop, "drop", 0, "rate of deliveries dropped")
	f.Float64Var(&duplicate, "duplicate", 0, "rate of deliveries sent twice")
	f.Float64Var(&reorder, "reorder", 0, "rate of deliveries held back behind the next")
	f.Float64Var(&badSig, "bad-signature", 0, "rate of deliveries with a wrong X-SVC-Signature")
	f.Float64Var(&delay, "delay", 0, "rate of deliveries delayed by --delay-ms")
	f.IntVar(&delayMS, "delay-ms", 0, "how long a delayed delivery waits, in milliseconds")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	cfg, key, endpoint, err := endpointCommand(e, cm, endpoint)
	if err != nil {
		return err
	}
	body := map[string]any{"drop": drop, "duplicate": duplicate, "reorder": reorder, "bad_signature": badSig,
		"delay": delay, "delay_ms": delayMS}
	resp, err := m.send(ctx, e, newClient(cfg, key), http.MethodPost, "/sandbox/webhook_endpoints/"+endpoint+"/faults", body)
	if err != nil {
		return err
	}
	return printFaults(e.stdout, resp, m.jsonOut)
}

func runFaultsClear(ctx context.Context, e env, args []string) error {
	var (
		cm       common
		m        mutation
		endpoint string
	)
	f := newFlags(e, "svc faults clear", "--endpoint we_…", `
Clear the webhook faults of one of your sandbox endpoints: deliveries go out as they are again.`)
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
	resp, err := m.send(ctx, e, newClient(cfg, key), http.MethodDelete, "/sandbox/webhook_endpoints/"+endpoint+"/faults", nil)
	if err != nil {
		return err
	}
	return printFaults(e.stdout, resp, m.jsonOut)
}

// faultsJSON is the answer of the faults control.
type faultsJSON struct {
	Endpoint     string  `json:"endpoint"`
	Drop         float64 `json:"drop"`
	Duplicate    float64 `json:"duplicate"`
	Reorder      float64 `json:"reorder"`
	BadSignature float64 `json:"bad_signature"`
	Delay        float64 `json:"delay"`
	DelayMS      int     `json:"delay_ms"`
}

func printFaults(w io.Writer, resp *response, jsonOut bool) error {
	if jsonOut {
		return printJSON(w, resp.body)
	}
	var fl faultsJSON
	if err := resp.decode(&fl); err != nil {
		return err
	}
	if fl == (faultsJSON{Endpoint: fl.Endpoint}) {
		fmt.Fprintf(w, "faults on %s: none\n", clean(fl.Endpoint))
		return nil
	}
	fmt.Fprintf(w, "faults on %s: drop %g, duplicate %g, reorder %g, bad signature %g, delay %g (%d ms)\n",
		clean(fl.Endpoint), fl.Drop, fl.Duplicate, fl.Reorder, fl.BadSignature, fl.Delay, fl.DelayMS)
	return nil
}

// apiClient loads the configuration of a command that calls the API with the key, and its client.
func apiClient(e env, cm common) (*config, *client, error) {
	cfg, err := loadConfig(e, cm)
	if err != nil {
		return nil, nil, err
	}
	key, err := cfg.needAPIKey()
	if err != nil {
		return nil, nil, err
	}
	return cfg, newClient(cfg, key), nil
}

// endpointCommand loads the configuration of a command about one endpoint and checks the endpoint ID.
func endpointCommand(e env, cm common, endpoint string) (*config, string, string, error) {
	cfg, err := loadConfig(e, cm)
	if err != nil {
		return nil, "", "", err
	}
	if endpoint == "" {
		endpoint = cfg.Endpoint
	}
	if err := checkEndpointID(endpoint); err != nil {
		return nil, "", "", err
	}
	key, err := cfg.needAPIKey()
	if err != nil {
		return nil, "", "", err
	}
	return cfg, key, endpoint, nil
}

// checkEndpointID refuses, before any request, an ID that cannot be one: it goes into a URL path.
func checkEndpointID(id string) error {
	if id == "" {
		return usagef("--endpoint is required (or set %s): the webhook endpoint's ID, we_…", envEndpoint)
	}
	if !strings.HasPrefix(id, "we_") || len(id) > 64 {
		return usagef("--endpoint %q is not a webhook endpoint ID: they look like we_…", id)
	}
	for _, c := range id[3:] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return usagef("--endpoint %q is not a webhook endpoint ID: they look like we_…", id)
		}
	}
	return nil
}

// ---- credentials

func runCredentialsNew(ctx context.Context, e env, args []string) error {
	var (
		cm common
		m  mutation
	)
	f := newFlags(e, "svc credentials new", "[flags]", `
Start a new evaluation: sandbox credentials for a licensee of its own (an API key, shown once, its
expiry and the base URL). An operator's command: it needs the server's admin token in
SVC_ADMIN_TOKEN (or admin_token in the config file).

  eval "$(svc credentials new --export)"   # sets SVC_API_KEY and SVC_BASE_URL`)
	cm.register(f.FlagSet)
	m.register(f, "SVC_API_KEY and SVC_BASE_URL")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	cfg, err := loadConfig(e, cm)
	if err != nil {
		return err
	}
	if cfg.AdminToken == "" {
		return usagef("the admin token is needed: set %s (or admin_token in the config file)", envAdminToken)
	}
	resp, err := m.send(ctx, e, newClient(cfg, cfg.AdminToken), http.MethodPost, "/sandbox/credentials", nil)
	if err != nil {
		return err
	}
	if m.jsonOut {
		return printJSON(e.stdout, resp.body)
	}
	var c struct {
		APIKey    string `json:"api_key"`
		ExpiresAt int64  `json:"expires_at"`
		KeyID     string `json:"key_id"`
		Licensee  string `json:"licensee"`
		BaseURL   string `json:"base_url"`
	}
	if err := resp.decode(&c); err != nil {
		return err
	}
	if m.exportTo {
		fmt.Fprintf(e.stdout, "export %s=%s\nexport %s=%s\n", envAPIKey, shellQuote(c.APIKey), envBaseURL, shellQuote(c.BaseURL))
		return nil
	}
	fmt.Fprintf(e.stdout, "sandbox credentials for licensee %s (key %s)%s\n", clean(c.Licensee), clean(c.KeyID), replayNote(resp))
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  api key\t%s\t(shown once: keep it as %s)\n", clean(c.APIKey), envAPIKey)
	fmt.Fprintf(tw, "  base url\t%s\n  expires\t%s\n", clean(c.BaseURL), time.Unix(c.ExpiresAt, 0).UTC().Format(time.RFC3339))
	return tw.Flush()
}
