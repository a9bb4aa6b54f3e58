package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/webhook"
)

// lostError: going on would skip events — the ones after the cursor were pruned. Exit code 5.
type lostError struct {
	endpoint      string
	cursor, first uint64
}

func (e *lostError) Error() string {
	gone := strconv.FormatUint(e.cursor+1, 10)
	if e.first-1 > e.cursor+1 {
		gone += "–" + strconv.FormatUint(e.first-1, 10)
	}
	return fmt.Sprintf("the events %s of %s, after the cursor, were pruned before they were forwarded: "+
		"nothing was skipped; to go on from sequence %d and accept the loss, pass --from %d with a new --cursor file",
		gone, e.endpoint, e.first, e.first)
}

// aheadError: the cursor read from disk is past the stream's newest event — another server's or
// stream's cursor, or one planted — so following it would skip every event up to it. Exit code 5.
type aheadError struct {
	endpoint, path string
	cursor         uint64
}

func (e *aheadError) Error() string {
	return fmt.Sprintf("the cursor %s is at sequence %d, but the newest event of %s is before it: a cursor of another server or stream, or one planted; "+
		"following it would skip every event up to %d silently. Nothing was forwarded; move the cursor away to start afresh (--from), or pass --cursor with a file of its own",
		e.path, e.cursor, e.endpoint, e.cursor)
}

// aheadAnswers is how many answers must find no event at the cursor's sequence, with none finding
// it, before listen calls the cursor ahead of the stream. A range page's signature covers its body,
// not the range asked for, so one empty page could be an old one replayed; listen refuses the
// cursor only on the stream's word, repeated.
const aheadAnswers = 3

// errAbandoned: a second interrupt stopped listen in the middle of a delivery. Exit code 130.
var errAbandoned = errors.New("interrupted again: the delivery in flight was abandoned; it is forwarded again next time")

// listenTiming are listen's waits; tests shorten them.
type listenTiming struct {
	poll       time.Duration // between range fetches once caught up
	minBackoff time.Duration // before the first retry of a failed forward or fetch
	maxBackoff time.Duration // the longest wait between retries
	attempt    time.Duration // one forward's timeout
}

var defaultTiming = listenTiming{poll: time.Second, minBackoff: 100 * time.Millisecond, maxBackoff: 10 * time.Second,
	attempt: 30 * time.Second}

// listener follows one endpoint's stream and forwards each event to a local URL.
type listener struct {
	e        env
	cfg      *config
	endpoint string
	forward  string
	secrets  []string
	rc       *webhook.RangeClient
	watch    *rollWatch // the range client's transport: it notes a rolled secret
	hc       *http.Client
	cursor   *cursorFile
	jsonOut  bool
	timing   listenTiming
	// mismatches counts the range pages in a row whose signature did not verify.
	mismatches int
	// behind is true once the stream is known to reach the cursor: an event at or after it was seen,
	// or the cursor is listen's own (none was read from disk). emptyAtCursor counts the answers that
	// found no event at the cursor's sequence.
	behind        bool
	emptyAtCursor int
}

func runListen(_ context.Context, e env, args []string) error {
	var (
		cm                  common
		endpoint, forwardTo string
		cursorPath          string
		from                uint64
		jsonOut             bool
		timing              = defaultTiming
	)
	f := newFlags(e, "svc listen", "--endpoint we_… --forward-to URL [flags]", `
Follow a webhook endpoint's events through range retrieval — so this machine needs no public URL —
and forward each to a local URL exactly as the platform delivers it: a POST with the event as
body, X-SVC-Sequence, and a fresh X-SVC-Signature made with the endpoint's secret
(SVC_WEBHOOK_SECRET). Every page of events is verified with that secret first. While a rolled
secret's old one still signs (svc endpoints roll-secret), pages carry a signature per secret and
verify with either; listen says once that the secret was rolled when it holds only the old one.

Events go in sequence order, one at a time; each is retried (with backoff) until the local URL
answers 2xx, and the next is not sent before. One line per attempt: the sequence, the type, the
event ID, the local status and the latency (--json: one JSON object per line).

The cursor — the last sequence answered 2xx — is kept on disk (--cursor), written durably after
each delivery, so a listen stopped and started again resumes after it: nothing lost, nothing sent
twice. Ctrl-C (or SIGTERM) stops once the delivery in flight is answered; a second Ctrl-C stops at
once, and that delivery is sent again next time (a process killed outright does the same, so a
receiver should, as the platform's consumers do, ignore a sequence it has already processed).
A cursor is refused when someone else could have planted it (a symbolic link, another user's file,
a directory others may write: exit status 2) or when it is ahead of the stream's newest event
(exit status 5): following either would skip events.

The endpoint's sandbox faults (svc faults set) change its deliveries, never its stream: what
listen forwards is every event once, in order, signed well.

  svc listen --endpoint we_… --forward-to http://localhost:3000/webhooks`)
	cm.register(f.FlagSet)
	f.StringVar(&endpoint, "endpoint", "", "the endpoint to follow, we_… (default $"+envEndpoint+")")
	f.StringVar(&forwardTo, "forward-to", "", "the local URL to POST each event to (required)")
	f.StringVar(&cursorPath, "cursor", "", "the cursor file, in a directory only you can write (default $XDG_CONFIG_HOME/svc/cursors/<endpoint>.json)")
	f.Uint64Var(&from, "from", 1, "where to start when there is no cursor yet: the first sequence to forward")
	f.BoolVar(&jsonOut, "json", false, "print one JSON object per delivery attempt")
	f.DurationVar(&timing.poll, "poll", timing.poll, "how often to ask for new events once caught up")
	f.DurationVar(&timing.attempt, "timeout", timing.attempt, "how long to wait for the local URL's answer")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	if forwardTo == "" {
		return usagef("svc listen: --forward-to is required: the local URL to POST the events to")
	}
	if u, err := url.Parse(forwardTo); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("svc listen: --forward-to %q must be an absolute http or https URL", forwardTo)
	}
	if from == 0 {
		return usagef("svc listen: --from must be 1 or more: sequences start at 1")
	}
	if timing.poll <= 0 || timing.attempt <= 0 {
		return usagef("svc listen: --poll and --timeout must be positive")
	}
	cfg, key, endpoint, err := endpointCommand(e, cm, endpoint)
	if err != nil {
		return err
	}
	watch := newRollWatch(baseTransport(), cfg.Secrets)
	rc, err := newRangeClient(cfg, key, watch)
	if err != nil {
		return err
	}
	if cursorPath == "" {
		if cursorPath, err = defaultCursorPath(e.getenv, endpoint); err != nil {
			return err
		}
	}
	cur, err := openCursor(cursorPath, endpoint, cfg.BaseURL, e.uid)
	if err != nil {
		return err
	}
	defer cur.close()
	fromSet := false
	f.Visit(func(fl *flag.Flag) { fromSet = fromSet || fl.Name == "from" })
	switch {
	case !cur.exists:
		cur.seq = from - 1
	case fromSet && from != cur.seq+1:
		fmt.Fprintf(e.stderr, "svc listen: --from %d is ignored: the cursor %s says sequence %d was the last forwarded (remove it to start elsewhere)\n",
			from, cursorPath, cur.seq)
	}
	l := &listener{e: e, cfg: cfg, endpoint: endpoint, forward: forwardTo, secrets: cfg.Secrets, rc: rc, watch: watch, cursor: cur,
		jsonOut: jsonOut, timing: timing, behind: !cur.exists || cur.seq == 0, hc: &http.Client{
			Transport: localTransport(),
			// The platform never follows a redirect; neither does its stand-in.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}}
	return l.run(e.interrupts)
}

// localTransport reaches the local URL directly: a proxy from the environment has no business
// between the developer and their own server.
func localTransport() *http.Transport {
	t := baseTransport()
	t.Proxy = nil
	return t
}

// run follows the stream until interrupted. The first interrupt (soft) stops fetching and waiting,
// and lets the delivery in flight finish; the second (hard) abandons it.
func (l *listener) run(interrupts <-chan os.Signal) error {
	soft, stopSoft := context.WithCancel(context.Background())
	hard, stopHard := context.WithCancel(context.Background())
	defer stopSoft()
	defer stopHard()
	go func() {
		select {
		case <-interrupts:
		case <-hard.Done():
			return
		}
		fmt.Fprintln(l.e.stderr, "svc listen: stopping once the delivery in flight is answered (interrupt again to stop at once)")
		stopSoft()
		select {
		case <-interrupts:
			stopHard()
		case <-hard.Done():
		}
	}()
	fmt.Fprintf(l.e.stderr, "svc listen: following %s from sequence %d (cursor %s), forwarding to %s\n",
		l.endpoint, l.cursor.seq+1, l.cursor.path, l.forward)
	backoff := l.timing.minBackoff
	for soft.Err() == nil {
		from := l.cursor.seq + 1
		batch := uint64(webhook.DefaultPageSize)
		events, err := l.fetch(soft, from, from+batch-1)
		if err != nil {
			if soft.Err() != nil {
				break
			}
			if err := l.fetchFailed(err, from); err != nil {
				return err
			}
			if !sleep(soft, backoff) {
				break
			}
			backoff = min(2*backoff, l.timing.maxBackoff)
			continue
		}
		backoff, l.mismatches = l.timing.minBackoff, 0
		if len(events) > 0 {
			l.behind = true
		} else if !l.behind {
			if err := l.checkHead(soft); err != nil {
				return err
			}
		}
		for i := range events {
			ev := &events[i]
			if ev.Sequence != l.cursor.seq+1 { // the RangeClient checks this; a cursor never jumps
				return fmt.Errorf("the range answered sequence %d where %d was next", ev.Sequence, l.cursor.seq+1)
			}
			if soft.Err() != nil {
				break
			}
			ok, err := l.deliver(soft, hard, ev)
			if err != nil {
				return err
			}
			if !ok {
				if hard.Err() != nil {
					return errAbandoned
				}
				break
			}
			if err := l.cursor.save(ev.Sequence); err != nil {
				return err
			}
		}
		if uint64(len(events)) < batch && !sleep(soft, l.timing.poll) {
			break
		}
	}
	if hard.Err() != nil {
		return errAbandoned
	}
	fmt.Fprintf(l.e.stderr, "svc listen: stopped; the cursor %s is at sequence %d\n", l.cursor.path, l.cursor.seq)
	return nil
}

// fetch fetches the events from..to, every page verified, and says once per run when a page that
// verified was also signed with a newer secret than listen's (rollWatch): the endpoint's secret was
// rolled, and listen will stop verifying when the old secret it holds expires.
func (l *listener) fetch(ctx context.Context, from, to uint64) ([]webhook.Event, error) {
	events, err := l.rc.FetchRange(ctx, l.endpoint, from, to)
	if l.watch.foreignSeen() && err == nil && !l.watch.off.Swap(true) {
		fmt.Fprintf(l.e.stderr, "svc listen: the endpoint's secret was rolled: its pages are signed with a new secret besides the one in %s. "+
			"listen goes on verifying with the secret it has until that one expires, when its pages stop verifying; "+
			"'svc endpoints roll-secret' printed the new secret: set %s to it (or to both, comma-separated, while the old one still signs) and start listen again\n",
			envSecret, envSecret)
	}
	return events, err
}

// checkHead asks for the event at the cursor's own sequence, once nothing follows it: a stream that
// has it has reached the cursor (listen is caught up); one that answers, again and again, that it
// has not is behind a cursor listen did not write, and listen stops rather than wait for sequences it
// would then skip.
func (l *listener) checkHead(ctx context.Context) error {
	events, err := l.fetch(ctx, l.cursor.seq, l.cursor.seq)
	var p *apierror.Error
	switch {
	case err == nil && len(events) > 0:
		l.behind = true
	case err == nil:
		if l.emptyAtCursor++; l.emptyAtCursor >= aheadAnswers {
			return &aheadError{endpoint: l.endpoint, path: l.cursor.path, cursor: l.cursor.seq}
		}
	case errors.As(err, &p) && p.Code == "events_pruned":
		l.behind = true // the event at the cursor existed, and retention has since removed it
	case ctx.Err() == nil:
		return l.fetchFailed(err, l.cursor.seq)
	}
	return nil
}

// fetchFailed decides what a failed range fetch means: a refusal that waiting cannot change ends
// listen (an unknown endpoint, a bad key, events pruned past the cursor); anything else — the network,
// a 5xx, a page that is not authentic — is reported and retried.
func (l *listener) fetchFailed(err error, from uint64) error {
	var p *apierror.Error
	if errors.As(err, &p) && p.Status >= 400 && p.Status < 500 && p.Status != http.StatusConflict &&
		p.Status != http.StatusTooManyRequests && p.Status != http.StatusRequestTimeout {
		if p.Code == "events_pruned" {
			first, ok := firstRetained(p)
			if !ok { // a 410 that does not say where the stream resumes: nothing to go on from
				return rangeError(err, l.cfg, l.endpoint, from, webhook.MaxSequence)
			}
			if l.cursor.exists {
				return &lostError{endpoint: l.endpoint, cursor: l.cursor.seq, first: first}
			}
			// No cursor: nothing was promised yet. Start at the oldest event the server keeps.
			fmt.Fprintf(l.e.stderr, "svc listen: the events before sequence %d were pruned; starting at %d\n", first, first)
			l.cursor.seq = first - 1
			return nil
		}
		return rangeError(err, l.cfg, l.endpoint, from, webhook.MaxSequence)
	}
	if errors.Is(err, webhook.ErrSignatureMismatch) {
		// A page that does not verify is never used. A few in a row are most likely the wrong secret,
		// which waiting does not fix; the cursor stays where it is either way.
		l.mismatches++
		if l.mismatches >= maxMismatches {
			return &invalidError{fmt.Sprintf("%d range pages in a row did not verify with %s: is it the endpoint's secret (the one 'svc endpoints create' printed)? Nothing was forwarded from them; the cursor is at sequence %d",
				l.mismatches, envSecret, l.cursor.seq)}
		}
		fmt.Fprintf(l.e.stderr, "svc listen: the events from sequence %d did not verify with %s, so they are not used; retrying: %v\n",
			from, envSecret, err)
		return nil
	}
	fmt.Fprintf(l.e.stderr, "svc listen: fetching events from sequence %d failed, retrying: %v\n", from, err)
	return nil
}

// maxMismatches is how many range pages in a row may fail their signature before listen stops.
const maxMismatches = 5

func firstRetained(p *apierror.Error) (uint64, bool) {
	switch v := p.Extensions["first_retained"].(type) {
	case float64:
		if v >= 1 && v <= float64(webhook.MaxSequence) {
			return uint64(v), true
		}
	case json.Number:
		n, err := strconv.ParseUint(v.String(), 10, 64)
		return n, err == nil && n >= 1
	}
	return 0, false
}

// deliver forwards ev until the local URL answers 2xx. It reports false when interrupted before a
// 2xx: softly between attempts (an attempt under way is finished first), or hard in the middle of one.
func (l *listener) deliver(soft, hard context.Context, ev *webhook.Event) (bool, error) {
	body, err := json.Marshal(ev) // the envelope exactly as the producer writes it
	if err != nil {
		return false, err
	}
	backoff := l.timing.minBackoff
	for attempt := 1; ; attempt++ {
		start := time.Now()
		status, err := l.post(hard, ev.Sequence, body)
		latency := time.Since(start)
		ok := err == nil && status >= 200 && status < 300
		wait := time.Duration(0)
		if !ok && soft.Err() == nil {
			wait = backoff
		}
		l.report(ev, attempt, status, err, latency, wait)
		if ok {
			return true, nil
		}
		if hard.Err() != nil || !sleep(soft, wait) {
			return false, nil
		}
		backoff = min(2*backoff, l.timing.maxBackoff)
	}
}

// post sends one delivery, signed now, and returns the local status.
func (l *listener) post(ctx context.Context, seq uint64, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timing.attempt)
	defer cancel()
	sig, err := webhook.Sign(body, time.Now(), l.secrets...)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.forward, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent()+" (listen)")
	req.Header.Set(webhook.HeaderSignature, sig)
	req.Header.Set(webhook.HeaderSequence, strconv.FormatUint(seq, 10))
	resp, err := l.hc.Do(req)
	if err != nil {
		return 0, unwrapURLError(err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// attemptLine is one delivery attempt, as --json prints it.
type attemptLine struct {
	Time      time.Time `json:"time"`
	Sequence  uint64    `json:"sequence"`
	Type      string    `json:"type"`
	ID        string    `json:"id"`
	Attempt   int       `json:"attempt"`
	Status    int       `json:"status,omitempty"`
	Error     string    `json:"error,omitempty"`
	LatencyMS float64   `json:"latency_ms"`
	Delivered bool      `json:"delivered"`
	RetryInMS int64     `json:"retry_in_ms,omitempty"`
}

func (l *listener) report(ev *webhook.Event, attempt, status int, err error, latency, wait time.Duration) {
	line := attemptLine{Time: time.Now().UTC(), Sequence: ev.Sequence, Type: ev.Type, ID: ev.ID, Attempt: attempt,
		Status: status, LatencyMS: float64(latency.Microseconds()) / 1000, Delivered: err == nil && status/100 == 2,
		RetryInMS: wait.Milliseconds()}
	if err != nil {
		line.Error = err.Error()
	}
	if l.jsonOut {
		if b, err := json.Marshal(line); err == nil {
			_ = printJSON(l.e.stdout, b)
		}
		return
	}
	result := strconv.Itoa(status)
	if err != nil {
		result = "error: " + line.Error
	} else if status/100 == 3 {
		result += " (redirects are not followed)"
	}
	retry := ""
	if !line.Delivered {
		retry = fmt.Sprintf("  attempt %d", attempt)
		if wait > 0 {
			retry += ", retrying in " + wait.String()
		}
	}
	fmt.Fprintf(l.e.stdout, "%s  #%d  %s  %s  -> %s  %s%s\n", line.Time.Format("15:04:05"), ev.Sequence, clean(ev.Type),
		clean(ev.ID), clean(result), latency.Round(100*time.Microsecond), retry)
}

// sleep waits d, or less when ctx ends; it reports whether the whole wait passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
