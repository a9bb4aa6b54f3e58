package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Units of `go test -benchmem`.
const (
	unitTime   = "ns/op"
	unitBytes  = "B/op"
	unitAllocs = "allocs/op"
)

// significance is the p-value under which benchreport calls two timings different, as benchstat does.
const significance = 0.05

// atFloor is how close to the limit ours must be for a tie with a peer to be explained as both being
// at the floor: then no implementation can be measurably faster.
const atFloor = 1.05

// impl is one column or row of a comparison: the last element of a benchmark name and how the report
// names it.
type impl struct {
	key, label string
}

// comparison is a family of benchmarks named Bench/<row…>/<impl>: ours, an optional limit (the cost
// no implementation can go under) and the peers, on the same inputs.
type comparison struct {
	bench, title, intro string
	ours                impl
	// also are other ways of ours to do the same, shown for reference without a verdict.
	also  []impl
	limit *impl
	peers []impl
	// target says what counts as ahead, and is printed under the table.
	target string
	// limitTarget, when positive, is the largest ours/limit time ratio the targets accept.
	limitTarget float64
}

// overhead is a family named Bench/<row…>/<impl> where two frameworks each run with and without a
// middleware, so that what counts is the ratio of each to its own bare handler.
type overhead struct {
	bench, title, intro string
	ours, oursBare      impl
	peer, peerBare      impl
	// also is another configuration of ours, shown in a table of its own against the same bare
	// handler and the same peer ratio; it does not count towards the target.
	also      *impl
	alsoIntro string
}

// listing is a family shown as measured, with no peer: Bench/<group>/<row…>.
type listing struct {
	bench, title, intro string
	groups              []impl
}

// Report is the input of Render: the parsed output, where it came from, and the machine.
type Report struct {
	Out     *Output
	Command string   // how to regenerate the report
	GoTest  string   // the go test command whose output this is
	Machine []string // "key: value" lines describing the machine
	Notes   string   // the closing note, markdown, written by hand
	// Scale is the saved output of a scale run (-scale), rendered as the scale section; nil renders the
	// section from Out, when Out has the scale benchmarks. ScaleSource names the file it came from.
	Scale       *Output
	ScaleSource string
	ScaleNotes  string // closes the scale section (with Scale only: the notes are about that run)
	misses      []string
	targets     []string
	rendered    map[string]bool
}

var webhookPeers = []impl{
	{"stripe", "stripe-go v85 `webhook`"},
	{"standardwebhooks", "Standard Webhooks (Go)"},
	{"svix", "Svix v1.44 (Go)"},
	{"gogithub", "go-github v75 `ValidateSignature`"},
}

var (
	limitHMAC = impl{"limit", "raw HMAC-SHA256 (limit)"}
	oursImpl  = impl{"ours", "**ours**"}
)

func comparisons() []comparison {
	return []comparison{
		{
			bench: "BenchmarkWebhookVerify", title: "Webhook signature verification",
			intro: "One successful verification of a signed delivery per operation, each library with its own " +
				"scheme (Stripe's `t=…,v1=…` for ours and Stripe; `webhook-id/-timestamp/-signature` for Standard " +
				"Webhooks and Svix; `sha256=` over the body alone for GitHub). The limit is one HMAC-SHA256 over " +
				"`<t>.<body>` with a reused keyed state and a constant-time compare: no header parsing at all.",
			ours: oursImpl, limit: &limitHMAC, peers: webhookPeers,
			target:      "Target: within 1.10× of the limit; faster than every peer, with fewer bytes and allocations.",
			limitTarget: 1.10,
		},
		{
			bench: "BenchmarkWebhookSign", title: "Webhook signing",
			intro: "One signature header per operation for the same body and timestamp. Ours is a `webhook.Signer` " +
				"kept per endpoint (its keyed HMAC states pooled, as the Verifier's are); the package-level " +
				"`webhook.Sign`, which keys a fresh HMAC per call, is shown for reference. go-github has no signer " +
				"(GitHub signs), so it has no row. The limit is the same raw HMAC as above.",
			ours: oursImpl, also: []impl{{"ours-oneshot", "ours, `webhook.Sign` one-shot"}},
			limit: &limitHMAC, peers: webhookPeers[:3],
			target: "Target: faster than every peer, with fewer bytes and allocations.",
		},
		{
			bench: "BenchmarkProblemWrite", title: "Problem body (RFC 9457) writing",
			intro: "One `400` with two located violations (`/account` missing, `/side` not an allowed value) " +
				"written to a discarding `http.ResponseWriter`, the error built in the operation as a handler " +
				"builds it. Ours also writes `request_id`, `code` per violation and `X-Request-Id`; huma runs its " +
				"content negotiation and transformers (`huma.WriteErr` through the `humago` adapter); problems " +
				"embeds `Problem` in a struct with an `errors` list and writes it as its `ProblemHandler` does.",
			ours: oursImpl,
			peers: []impl{
				{"huma", "huma v2 `ErrorModel`"},
				{"problems", "moogar0880/problems"},
			},
			target: "Target: faster than every peer, with fewer bytes and allocations.",
		},
	}
}

func overheads() []overhead {
	return []overhead{{
		bench: "BenchmarkIdempotency", title: "Idempotency middleware",
		intro: "A `POST` with an `Idempotency-Key`, request and response bodies of the size shown, handled in " +
			"process (no network): net/http through `ServeHTTP` on a reused request, Fiber through " +
			"`app.Handler()` on a `fasthttp.RequestCtx`. *first* is a new key per request (claim, run the " +
			"handler, store the response); *replay* repeats one completed key (the stored response is written " +
			"and the handler does not run). Each middleware is compared with its own framework's bare handler, " +
			"since the frameworks differ: the ratio is middleware ÷ bare, and `+ns` is what the middleware adds. " +
			"Ours also fingerprints the request (SHA-256 of the body), scopes keys, holds a lease and " +
			"checks the fingerprint on replay; Fiber's does none of these.",
		ours: impl{"ours", "ours"}, oursBare: impl{"nethttp", "net/http bare"},
		peer: impl{"fiber", "Fiber v3"}, peerBare: impl{"fiberbare", "Fiber bare"},
		also: &impl{"ours-principal", "ours, scoped by principal"},
		alsoIntro: "The table above runs ours with its defaults, whose scope is a SHA-256 of the Authorization header " +
			"(a credential is never stored or compared as it is). A service that authenticates first sets " +
			"`Options.Scope` from the authenticated principal (`apikey.RequestScope`; the reference server does " +
			"the same); this is ours so wired, against the same bare handler and Fiber's ratio from the table above:",
	}}
}

func listings() []listing {
	return []listing{{
		bench: "BenchmarkStore", title: "Idempotency storage backends",
		intro: "Each idempotency store (`idempotency/driver.Store`) through the conformance benchmarks (`idempotency/storetest.RunBenchmarks`): " +
			"the store operations the middleware performs per request. Redis and PostgreSQL are local servers " +
			"on the same machine; their rows are missing when `SVC_TEST_REDIS_URL` / `SVC_TEST_POSTGRES_DSN` " +
			"were unset.",
		groups: []impl{{"memory", "memory"}, {"redis", "Redis"}, {"postgres", "PostgreSQL"}},
	}}
}

// Render writes the whole markdown report.
func (r *Report) Render(w io.Writer) error {
	r.rendered = map[string]bool{}
	r.misses, r.targets = nil, nil
	var body strings.Builder
	for _, c := range comparisons() {
		r.renderComparison(&body, c)
	}
	for _, o := range overheads() {
		r.renderOverhead(&body, o)
	}
	for _, l := range listings() {
		r.renderListing(&body, l)
	}
	r.renderOthers(&body)
	scale := r.Scale
	if scale == nil {
		scale = r.Out
	}
	n := body.Len()
	notes := r.ScaleNotes
	if r.Scale == nil {
		notes = ""
	}
	renderScale(&body, scale, r.ScaleSource, notes)
	if body.Len() > n {
		body.WriteString("\n")
	}

	var b strings.Builder
	b.WriteString("# Benchmarks\n\n")
	b.WriteString("<!-- Generated by benchmarks/cmd/benchreport; do not edit by hand: regenerate. -->\n\n")
	b.WriteString("The library measured side by side with what a user would pick instead, on identical inputs, " +
		"in one run on one machine. Every figure is the median of the runs (benchstat-style), `±` is the " +
		"95% confidence interval of that median, and \"faster\" means the medians differ with p < 0.05 " +
		"(Mann-Whitney U test). Ratios are of medians.\n\n")
	b.WriteString("## How this was produced\n\n")
	if r.Command != "" {
		fmt.Fprintf(&b, "Regenerate (from `benchmarks/`):\n\n```sh\n%s\n```\n\n", r.Command)
	}
	if r.GoTest != "" {
		fmt.Fprintf(&b, "which runs, in `benchmarks/`:\n\n```sh\n%s\n```\n\n", r.GoTest)
	}
	b.WriteString("Machine:\n\n")
	for _, m := range r.Machine {
		fmt.Fprintf(&b, "- %s\n", m)
	}
	b.WriteString("\n## Targets\n\n")
	if len(r.targets) == 0 {
		b.WriteString("No target could be checked: the output has none of the benchmarks they name.\n")
	}
	for _, t := range r.targets {
		fmt.Fprintf(&b, "- %s\n", t)
	}
	b.WriteString("\n## Where ours is not ahead\n\n")
	if len(r.misses) == 0 {
		b.WriteString("Nowhere: on every row ours is ahead of every peer.\n")
	}
	for _, m := range r.misses {
		fmt.Fprintf(&b, "- %s\n", m)
	}
	b.WriteString("\n")
	b.WriteString(body.String())
	if strings.TrimSpace(r.Notes) != "" {
		b.WriteString("## Closing note\n\n")
		b.WriteString(strings.TrimSpace(r.Notes))
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// rows returns, in order of first appearance, the middle parts of the names Bench/<row>/<impl>.
func (r *Report) rows(bench string) []string {
	var rows []string
	seen := map[string]bool{}
	for _, res := range r.Out.Results {
		rest, ok := strings.CutPrefix(res.Name, bench+"/")
		if !ok {
			continue
		}
		row := "" // Bench/<impl>: a family with a single row
		if i := strings.LastIndexByte(rest, '/'); i >= 0 {
			row = rest[:i]
		}
		if !seen[row] {
			seen[row] = true
			rows = append(rows, row)
		}
	}
	return rows
}

func (r *Report) get(name string) *Result {
	res := r.Out.Get(name)
	if res != nil {
		r.rendered[name] = true
	}
	return res
}

func summary(res *Result, unit string) Summary {
	if res == nil {
		return Summarize(nil)
	}
	return Summarize(res.Values(unit))
}

func (r *Report) renderComparison(b *strings.Builder, c comparison) {
	rows := r.rows(c.bench)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "## %s\n\n%s\n\n%s\n\n", c.title, c.intro, c.target)
	for _, row := range rows {
		if row != "" {
			fmt.Fprintf(b, "### %s — %s\n\n", c.title, strings.ReplaceAll(row, "/", ", "))
		}
		name := func(i impl) string { return join(c.bench, row, i.key) }
		ours := r.get(name(c.ours))
		ot, ob, oa := summary(ours, unitTime), summary(ours, unitBytes), summary(ours, unitAllocs)
		var lt Summary
		if c.limit != nil {
			lt = summary(r.get(name(*c.limit)), unitTime)
		}
		if c.limit != nil {
			b.WriteString("| library | ns/op | B/op | allocs/op | time ÷ limit | ours' time ÷ this | ours ahead? |\n")
			b.WriteString("|---|---:|---:|---:|---:|---:|---|\n")
		} else {
			b.WriteString("| library | ns/op | B/op | allocs/op | ours' time ÷ this | ours ahead? |\n")
			b.WriteString("|---|---:|---:|---:|---:|---|\n")
		}
		line := func(label string, t, by, al Summary, vsOurs, verdict string) {
			fmt.Fprintf(b, "| %s | %s | %s | %s | ", label, fmtTime(t), fmtCount(by), fmtCount(al))
			if c.limit != nil {
				fmt.Fprintf(b, "%s | ", ratio(t.Median, lt.Median))
			}
			fmt.Fprintf(b, "%s | %s |\n", vsOurs, verdict)
		}
		line(c.ours.label, ot, ob, oa, "—", "—")
		for _, a := range c.also {
			if res := r.get(name(a)); res != nil {
				at := summary(res, unitTime)
				line(a.label, at, summary(res, unitBytes), summary(res, unitAllocs), ratio(ot.Median, at.Median), "(ours, for reference)")
			}
		}
		if c.limit != nil {
			res := r.get(name(*c.limit))
			line(c.limit.label, summary(res, unitTime), summary(res, unitBytes), summary(res, unitAllocs),
				ratio(ot.Median, summary(res, unitTime).Median), "(the floor)")
		}
		for _, p := range c.peers {
			res := r.get(name(p))
			if res == nil {
				continue
			}
			pt, pb, pa := summary(res, unitTime), summary(res, unitBytes), summary(res, unitAllocs)
			verdict := "not measured"
			if ours != nil {
				var short []string
				switch p := MannWhitney(ot.Samples, pt.Samples); {
				case p < significance && ot.Median < pt.Median:
					// ahead on time
				case p < significance:
					short = append(short, fmt.Sprintf("slower (%s the time)", ratio(ot.Median, pt.Median)))
				case c.limit != nil && ot.Median <= atFloor*lt.Median:
					short = append(short, fmt.Sprintf("not significantly faster (p=%.2f): ours is at the HMAC floor (%s the limit)",
						p, ratio(ot.Median, lt.Median)))
				default:
					short = append(short, fmt.Sprintf("not significantly faster (p=%.2f)", p))
				}
				if ob.Median >= pb.Median {
					short = append(short, fmt.Sprintf("not fewer bytes (%s vs %s B/op)", fmtNum(ob.Median), fmtNum(pb.Median)))
				}
				if oa.Median >= pa.Median {
					short = append(short, fmt.Sprintf("not fewer allocations (%s vs %s)", fmtNum(oa.Median), fmtNum(pa.Median)))
				}
				if len(short) == 0 {
					verdict = "yes"
				} else {
					verdict = "**no**: " + strings.Join(short, "; ")
					r.misses = append(r.misses, fmt.Sprintf("%s, vs %s: %s.", where(c.title, row), p.label, strings.Join(short, "; ")))
				}
			}
			line(p.label, pt, pb, pa, ratio(ot.Median, pt.Median), verdict)
		}
		b.WriteString("\n")
		if c.limitTarget > 0 && ours != nil && c.limit != nil && !math.IsNaN(lt.Median) {
			got := ot.Median / lt.Median
			mark := "met"
			if got > c.limitTarget {
				mark = "**missed**"
				r.misses = append(r.misses, fmt.Sprintf("%s: %.2f× the raw HMAC, above the %.2f× target.",
					where(c.title, row), got, c.limitTarget))
			}
			r.targets = append(r.targets, fmt.Sprintf("%s: ours is %.2f× the raw HMAC (target ≤ %.2f×): %s.",
				where(c.title, row), got, c.limitTarget, mark))
		}
	}
	if c.limitTarget > 0 {
		r.targets = append(r.targets, r.peerTarget(c))
	}
}

// peerTarget sums up a comparison's peer rows for the Targets list.
func (r *Report) peerTarget(c comparison) string {
	n := 0
	for _, m := range r.misses {
		if strings.HasPrefix(m, c.title) && strings.Contains(m, ", vs ") {
			n++
		}
	}
	if n == 0 {
		return c.title + ": faster than every peer with fewer bytes and allocations on every row: met."
	}
	return fmt.Sprintf("%s: ahead of every peer on every row: **missed** on %d row(s), listed below.", c.title, n)
}

func (r *Report) renderOverhead(b *strings.Builder, o overhead) {
	rows := r.rows(o.bench)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "## %s\n\n%s\n\nTarget: ours' ratio over its bare handler lower than Fiber's on every row.\n\n", o.title, o.intro)
	fmt.Fprintf(b, "| case | %s ns/op | %s ns/op | ours × | ours +ns | ours B/op, allocs | %s ns/op | %s ns/op | Fiber × | Fiber +ns | Fiber B/op, allocs | ours' ratio lower? |\n",
		o.ours.label, o.oursBare.label, o.peer.label, o.peerBare.label)
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	met, total := 0, 0
	for _, row := range rows {
		name := func(i impl) string { return join(o.bench, row, i.key) }
		ours, oursBare := r.get(name(o.ours)), r.get(name(o.oursBare))
		peer, peerBare := r.get(name(o.peer)), r.get(name(o.peerBare))
		ot, obt := summary(ours, unitTime), summary(oursBare, unitTime)
		pt, pbt := summary(peer, unitTime), summary(peerBare, unitTime)
		oRatio, pRatio := ot.Median/obt.Median, pt.Median/pbt.Median
		verdict := "not measured"
		if !math.IsNaN(oRatio) && !math.IsNaN(pRatio) {
			total++
			if oRatio < pRatio {
				verdict = "yes"
				met++
			} else {
				verdict = fmt.Sprintf("**no** (%.2f× vs %.2f×)", oRatio, pRatio)
				r.misses = append(r.misses, fmt.Sprintf("%s, %s: ours adds %.2f× over net/http, Fiber's adds %.2f× over bare Fiber.",
					o.title, strings.ReplaceAll(row, "/", ", "), oRatio, pRatio))
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			strings.ReplaceAll(row, "/", ", "), fmtTime(ot), fmtTime(obt), fmtRatio(oRatio), fmtAdded(ot.Median-obt.Median),
			bytesAllocs(ours), fmtTime(pt), fmtTime(pbt), fmtRatio(pRatio), fmtAdded(pt.Median-pbt.Median),
			bytesAllocs(peer), verdict)
	}
	b.WriteString("\n")
	if o.also != nil && r.has(o.bench, rows, *o.also) {
		fmt.Fprintf(b, "%s\n\n", o.alsoIntro)
		fmt.Fprintf(b, "| case | %s ns/op | × over %s | +ns | B/op, allocs | Fiber × | ratio lower than Fiber's? |\n", o.also.label, o.oursBare.label)
		b.WriteString("|---|---:|---:|---:|---:|---:|---|\n")
		for _, row := range rows {
			name := func(i impl) string { return join(o.bench, row, i.key) }
			res := r.get(name(*o.also))
			at, obt := summary(res, unitTime), summary(r.get(name(o.oursBare)), unitTime)
			pt, pbt := summary(r.get(name(o.peer)), unitTime), summary(r.get(name(o.peerBare)), unitTime)
			aRatio, pRatio := at.Median/obt.Median, pt.Median/pbt.Median
			verdict := "not measured"
			if !math.IsNaN(aRatio) && !math.IsNaN(pRatio) {
				verdict = "yes"
				if aRatio >= pRatio {
					verdict = "no"
				}
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s |\n", strings.ReplaceAll(row, "/", ", "), fmtTime(at),
				fmtRatio(aRatio), fmtAdded(at.Median-obt.Median), bytesAllocs(res), fmtRatio(pRatio), verdict)
		}
		b.WriteString("\n")
	}
	if total > 0 {
		mark := "met"
		if met < total {
			mark = fmt.Sprintf("**missed** on %d of %d rows", total-met, total)
		}
		r.targets = append(r.targets, fmt.Sprintf("%s: overhead ratio lower than Fiber's on every row: %s.", o.title, mark))
	}
}

func (r *Report) renderListing(b *strings.Builder, l listing) {
	var present []impl
	for _, g := range l.groups {
		if len(r.rows(l.bench+"/"+g.key)) > 0 || r.hasUnder(l.bench+"/"+g.key+"/") {
			present = append(present, g)
		}
	}
	if len(present) == 0 {
		return
	}
	fmt.Fprintf(b, "## %s\n\n%s\n\n", l.title, l.intro)
	b.WriteString("| backend | operation | ns/op | B/op | allocs/op |\n|---|---|---:|---:|---:|\n")
	for _, g := range l.groups {
		prefix := l.bench + "/" + g.key + "/"
		if !r.hasUnder(prefix) {
			fmt.Fprintf(b, "| %s | (not run) | | | |\n", g.label)
			continue
		}
		for _, res := range r.Out.Results {
			op, ok := strings.CutPrefix(res.Name, prefix)
			if !ok {
				continue
			}
			r.rendered[res.Name] = true
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", g.label, op, fmtTime(summary(res, unitTime)),
				fmtCount(summary(res, unitBytes)), fmtCount(summary(res, unitAllocs)))
		}
	}
	b.WriteString("\n")
}

func (r *Report) hasUnder(prefix string) bool {
	for _, res := range r.Out.Results {
		if strings.HasPrefix(res.Name, prefix) {
			return true
		}
	}
	return false
}

// renderOthers lists benchmarks no section claimed, so that nothing measured is dropped silently.
func (r *Report) renderOthers(b *strings.Builder) {
	var rest []*Result
	for _, res := range r.Out.Results {
		if !r.rendered[res.Name] && !isScale(res.Name) { // the scale section has them
			rest = append(rest, res)
		}
	}
	if len(rest) == 0 {
		return
	}
	b.WriteString("## Other benchmarks\n\n| benchmark | ns/op | B/op | allocs/op |\n|---|---:|---:|---:|\n")
	for _, res := range rest {
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", strings.TrimPrefix(res.Name, "Benchmark"),
			fmtTime(summary(res, unitTime)), fmtCount(summary(res, unitBytes)), fmtCount(summary(res, unitAllocs)))
	}
	b.WriteString("\n")
}

func bytesAllocs(res *Result) string {
	if res == nil {
		return "—"
	}
	return fmtCount(summary(res, unitBytes)) + ", " + fmtCount(summary(res, unitAllocs))
}

// fmtTime is the median with its spread: "1,117 ±2%".
func fmtTime(s Summary) string {
	if math.IsNaN(s.Median) {
		return "—"
	}
	out := fmtNum(s.Median)
	if sp := s.Spread(); !math.IsNaN(sp) {
		out += fmt.Sprintf(" ±%.0f%%", sp*100)
	}
	return out
}

func fmtCount(s Summary) string {
	if math.IsNaN(s.Median) {
		return "—"
	}
	return fmtNum(s.Median)
}

// fmtNum prints with three significant digits at most below 100 and whole numbers with thousands
// separators above.
func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case a == math.Trunc(a) || a >= 100:
		s := strconv.FormatInt(int64(math.Round(v)), 10)
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		if neg {
			s = "-" + s
		}
		return s
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func ratio(a, b float64) string { return fmtRatio(a / b) }

func fmtRatio(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "—"
	}
	return fmt.Sprintf("%.2f×", x)
}

func fmtAdded(d float64) string {
	if math.IsNaN(d) {
		return "—"
	}
	if d >= 0 {
		return "+" + fmtNum(d)
	}
	return fmtNum(d)
}

// join names a benchmark: bench/row/impl, or bench/impl for a family with one row.
func join(bench, row, impl string) string {
	if row == "" {
		return bench + "/" + impl
	}
	return bench + "/" + row + "/" + impl
}

// where names a row for the lists: "Webhook signing, 64KiB".
func where(title, row string) string {
	if row == "" {
		return title
	}
	return title + ", " + strings.ReplaceAll(row, "/", ", ")
}

// has reports whether any row of bench has a result for i.
func (r *Report) has(bench string, rows []string, i impl) bool {
	for _, row := range rows {
		if r.Out.Get(join(bench, row, i.key)) != nil {
			return true
		}
	}
	return false
}
