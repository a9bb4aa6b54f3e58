package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/webhook"
)

func runEvents(ctx context.Context, e env, args []string) error {
	var (
		cm       common
		endpoint string
		from, to uint64
		jsonOut  bool
	)
	f := newFlags(e, "svc events", "--endpoint we_… --from N [--to M] [--json]", `
Fetch an endpoint's events from sequence N to M (inclusive; without --to, up to the newest) by range
retrieval, verify every page's X-SVC-Signature with the endpoint's secret (SVC_WEBHOOK_SECRET), and
print them in sequence order. A page that is not authentic, skips or repeats a sequence, or names
another endpoint stops the command (exit status 1) before anything of it is printed.

--json prints one event per line, each the envelope exactly as a delivery carries it (for jq).`)
	cm.register(f.FlagSet)
	f.StringVar(&endpoint, "endpoint", "", "the endpoint, we_… (default $"+envEndpoint+")")
	f.Uint64Var(&from, "from", 0, "the first sequence, from 1 (required)")
	f.Uint64Var(&to, "to", 0, "the last sequence (default: the newest)")
	f.BoolVar(&jsonOut, "json", false, "print one event envelope per line, as JSON")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	if from == 0 {
		return usagef("svc events: --from is required: the first sequence, 1 or more")
	}
	if to != 0 && to < from {
		return usagef("svc events: --to %d is before --from %d", to, from)
	}
	if to == 0 {
		to = webhook.MaxSequence
	}
	cfg, key, endpoint, err := endpointCommand(e, cm, endpoint)
	if err != nil {
		return err
	}
	rc, err := newRangeClient(cfg, key, baseTransport())
	if err != nil {
		return err
	}
	var n int
	for next := from; next <= to; {
		last := min(to, next+webhook.MaxPageSize-1)
		events, err := rc.FetchRange(ctx, endpoint, next, last)
		if err != nil {
			return rangeError(err, cfg, endpoint, next, last)
		}
		for i := range events {
			if err := printEvent(e.stdout, &events[i], jsonOut); err != nil {
				return err
			}
		}
		n += len(events)
		if uint64(len(events)) < last-next+1 || last == webhook.MaxSequence {
			break
		}
		next = last + 1
	}
	switch {
	case n == 0:
		fmt.Fprintf(e.stderr, "no events from sequence %d on %s\n", from, endpoint)
	default:
		fmt.Fprintf(e.stderr, "%d events from sequence %d on %s, every page's signature verified\n", n, from, endpoint)
	}
	return nil
}

// printEvent prints one event: as its envelope when jsonOut, else as a line a person reads.
func printEvent(w io.Writer, ev *webhook.Event, jsonOut bool) error {
	if jsonOut {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		return printJSON(w, b)
	}
	_, err := fmt.Fprintf(w, "#%d  %s  %s  %s  %s\n", ev.Sequence, time.Unix(ev.Created, 0).UTC().Format(time.RFC3339),
		clean(ev.Type), clean(ev.ID), clean(string(ev.Data)))
	return err
}

// newRangeClient builds the verifying range client of events and listen, under the key's version,
// sending its requests through rt.
func newRangeClient(cfg *config, key string, rt http.RoundTripper) (*webhook.RangeClient, error) {
	secrets, err := cfg.needSecrets()
	if err != nil {
		return nil, err
	}
	v, err := webhook.NewVerifier(secrets, nil)
	if err != nil {
		return nil, usagef("%s: %v", envSecret, err)
	}
	rc, err := webhook.NewRangeClient(cfg.BaseURL, key, v, &webhook.RangeClientOptions{
		APIVersion: cfg.APIVersion, PageSize: webhook.MaxPageSize,
		HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: rt,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	})
	if err != nil {
		return nil, usagef("%v", err)
	}
	return rc, nil
}

// rangeError turns a failed fetch into the error that says what happened and sets the exit status:
// the server's problem (3, or 4 for 5xx), a page that is not authentic (1), or the network (4).
func rangeError(err error, cfg *config, endpoint string, from, to uint64) error {
	target := fmt.Sprintf("%s/%s/webhook_endpoints/%s/events", cfg.BaseURL, cfg.APIVersion, endpoint)
	var p *apierror.Error
	if errors.As(err, &p) {
		return &problemError{method: http.MethodGet, target: target, status: p.Status, problem: p}
	}
	if errors.Is(err, webhook.ErrRangeResponse) {
		return &invalidError{fmt.Sprintf("the events %d–%s of %s are not authentic, nothing of them is used: %v (is %s the endpoint's secret?)",
			from, lastName(to), endpoint, err, envSecret)}
	}
	return fmt.Errorf("GET %s: %w", target, err)
}

func lastName(to uint64) string {
	if to == webhook.MaxSequence {
		return "newest"
	}
	return strconv.FormatUint(to, 10)
}
