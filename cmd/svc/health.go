package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"text/tabwriter"
	"time"
)

// ---- endpoints stats

// statsJSON is an endpoint's delivery statistics as the server answers them.
type statsJSON struct {
	Endpoint       string  `json:"endpoint"`
	Status         string  `json:"status"`
	DisabledReason *string `json:"disabled_reason"`
	FailingSince   *int64  `json:"failing_since"`
	Backlog        struct {
		Events    int    `json:"events"`
		OldestAge *int64 `json:"oldest_age"`
	} `json:"backlog"`
	Hour windowJSON `json:"hour"`
	Day  windowJSON `json:"day"`
	Week windowJSON `json:"week"`
}

type windowJSON struct {
	Attempts    int      `json:"attempts"`
	Delivered   int      `json:"delivered"`
	Failed      int      `json:"failed"`
	Abandoned   int      `json:"abandoned"`
	SuccessRate *float64 `json:"success_rate"`
	LatencyMS   *struct {
		P50 int64 `json:"p50"`
		P99 int64 `json:"p99"`
	} `json:"latency_ms"`
}

func runEndpointsStats(ctx context.Context, e env, args []string) error {
	var (
		cm       common
		endpoint string
		jsonOut  bool
	)
	f := newFlags(e, "svc endpoints stats", "[--endpoint we_…] [flags]", `
Show how a webhook endpoint's deliveries fare: for the last hour, day and week, the attempts by
outcome (delivered; failed, and retried; abandoned), the success rate and the latency (p50 and p99,
each an upper bound within a fifth), and now: its status, since when its deliveries fail (an
endpoint failing too long is disabled), and its backlog — the events not yet delivered and how long
the oldest has waited.`)
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
	resp, err := newClient(cfg, key).do(ctx, http.MethodGet, "/webhook_endpoints/"+endpoint+"/stats", nil, "")
	if err != nil {
		return err
	}
	if jsonOut {
		return printJSON(e.stdout, resp.body)
	}
	var st statsJSON
	if err := resp.decode(&st); err != nil {
		return err
	}
	printStats(e.stdout, &st)
	return nil
}

// printStats writes the statistics as rows, then one line per window.
func printStats(w io.Writer, st *statsJSON) {
	fmt.Fprintf(w, "webhook endpoint %s\n", clean(st.Endpoint))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	status := clean(st.Status)
	if st.DisabledReason != nil {
		status += " (" + clean(*st.DisabledReason) + ")"
	}
	fmt.Fprintf(tw, "  status\t%s\n", status)
	if st.FailingSince != nil {
		fmt.Fprintf(tw, "  failing since\t%s\n", unixTime(st.FailingSince))
	}
	backlog := "nothing waits"
	if st.Backlog.Events > 0 {
		backlog = fmt.Sprintf("%d event(s) wait", st.Backlog.Events)
		if st.Backlog.OldestAge != nil {
			backlog += ", the oldest for " + (time.Duration(*st.Backlog.OldestAge) * time.Second).String()
		}
	}
	fmt.Fprintf(tw, "  backlog\t%s\n", backlog)
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "WINDOW\tATTEMPTS\tDELIVERED\tFAILED\tABANDONED\tSUCCESS\tP50\tP99\t")
	for _, win := range []struct {
		name string
		w    windowJSON
	}{{"hour", st.Hour}, {"day", st.Day}, {"week", st.Week}} {
		rate, p50, p99 := "-", "-", "-"
		if win.w.SuccessRate != nil {
			rate = strconv.FormatFloat(100**win.w.SuccessRate, 'f', 1, 64) + "%"
		}
		if win.w.LatencyMS != nil {
			p50 = strconv.FormatInt(win.w.LatencyMS.P50, 10) + "ms"
			p99 = strconv.FormatInt(win.w.LatencyMS.P99, 10) + "ms"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t\n", win.name, win.w.Attempts, win.w.Delivered, win.w.Failed,
			win.w.Abandoned, rate, p50, p99)
	}
	_ = tw.Flush()
}

// ---- events resend, events recover

// redeliveryJSON is the server's answer to resend and recover.
type redeliveryJSON struct {
	Endpoint string `json:"endpoint"`
	From     uint64 `json:"from"`
	To       uint64 `json:"to"`
	Queued   int    `json:"queued"`
}

func runEventsResend(ctx context.Context, e env, args []string) error {
	var (
		cm       common
		m        mutation
		endpoint string
		sequence uint64
	)
	f := newFlags(e, "svc events resend", "--sequence N [--endpoint we_…] [flags]", `
Push one retained event to the endpoint again: the same body and sequence, under a fresh signature,
with X-SVC-Redelivery: true. It goes behind the endpoint's normal deliveries. A receiver that follows
the sequence treats it as a duplicate; one that lost its data takes it. An event not delivered yet
is not queued twice: it goes out anyway.`)
	cm.register(f.FlagSet)
	m.register(f, "")
	f.StringVar(&endpoint, "endpoint", "", "the endpoint, we_… (default $"+envEndpoint+")")
	f.Uint64Var(&sequence, "sequence", 0, "the event's sequence, from 1 (required)")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	if sequence == 0 {
		return usagef("svc events resend: --sequence is required: the event's sequence, 1 or more")
	}
	return redeliver(ctx, e, cm, &m, endpoint, "/events/"+strconv.FormatUint(sequence, 10)+"/resend", nil)
}

func runEventsRecover(ctx context.Context, e env, args []string) error {
	var (
		cm       common
		m        mutation
		endpoint string
		from, to uint64
	)
	f := newFlags(e, "svc events recover", "--from N --to M [--endpoint we_…] [flags]", `
Push the retained events from sequence N to M (inclusive) to the endpoint again, in order, behind its
normal deliveries: the same bodies and sequences, fresh signatures, X-SVC-Redelivery: true. For a
receiver that lost its data; one that follows the sequence treats them as duplicates. The server
bounds a recovery (10,000 events on the reference server): split a longer range.`)
	cm.register(f.FlagSet)
	m.register(f, "")
	f.StringVar(&endpoint, "endpoint", "", "the endpoint, we_… (default $"+envEndpoint+")")
	f.Uint64Var(&from, "from", 0, "the first sequence, from 1 (required)")
	f.Uint64Var(&to, "to", 0, "the last sequence (required)")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	switch {
	case from == 0:
		return usagef("svc events recover: --from is required: the first sequence, 1 or more")
	case to == 0:
		return usagef("svc events recover: --to is required: the last sequence")
	case to < from:
		return usagef("svc events recover: --to %d is before --from %d", to, from)
	}
	return redeliver(ctx, e, cm, &m, endpoint, "/recover", map[string]uint64{"from": from, "to": to})
}

// redeliver sends a resend or recover and says what was queued.
func redeliver(ctx context.Context, e env, cm common, m *mutation, endpoint, path string, body any) error {
	cfg, key, endpoint, err := endpointCommand(e, cm, endpoint)
	if err != nil {
		return err
	}
	resp, err := m.send(ctx, e, newClient(cfg, key), http.MethodPost, "/webhook_endpoints/"+endpoint+path, body)
	if err != nil {
		return err
	}
	if m.jsonOut {
		return printJSON(e.stdout, resp.body)
	}
	var out redeliveryJSON
	if err := resp.decode(&out); err != nil {
		return err
	}
	what := fmt.Sprintf("event %d", out.From)
	if out.To != out.From {
		what = fmt.Sprintf("events %d–%d", out.From, out.To)
	}
	note := ""
	if out.Queued == 0 {
		note = " (not delivered yet, or queued already: nothing more to push)"
	}
	fmt.Fprintf(e.stdout, "webhook endpoint %s, %s: %d queued for redelivery%s%s\n", clean(out.Endpoint), what, out.Queued, note,
		replayNote(resp))
	return nil
}
