package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// renderScaleFile renders the scale section of testdata/scale.txt (a synthetic -scale run with
// known outcomes).
func renderScaleFile(t *testing.T) string {
	t.Helper()
	f, err := os.Open("testdata/scale.txt")
	require.NoError(t, err)
	defer f.Close()
	out, err := Parse(f)
	require.NoError(t, err)
	var b strings.Builder
	renderScale(&b, out, "results/scale.txt", "Why it is so.\n")
	return b.String()
}

func TestRenderScale(t *testing.T) {
	doc := renderScaleFile(t)
	tests := []struct{ name, want string }{
		{"markers", scaleBegin + "\n\n## The event log at scale (issue 37)\n"},
		{"command", "```sh\ngo run ./cmd/benchreport -scale\n```"},
		{"go test", "```sh\nSVC_BENCH_SCALE_EVENTS=1000000 go test -run '^$' -bench ^BenchmarkScale"},
		{"saved where", "saves in `benchmarks/results/scale.txt`"},
		{"commit", "- commit: abc1234 pgstore: the design measured"},
		{"autovacuum", "- PostgreSQL autovacuum: off"},
		{"flow row, median of three runs", "| 100 | 10,956 | 11,000 | 1.00× | 650 | 2,900 |"},
		{"flow target", "Delivered/s at least appended/s with 100 endpoints and a fast consumer: 1.00× (11,000 delivered/s against 10,956 appended/s): met."},
		{"stream target", "One endpoint's ordered stream at least 3,000 deliveries/s to a fast consumer, order kept: 963/s, order kept: **missed**."},
		{"claim row", "| 1 | 1,000,000 | 1,200 | 1,500 | 10 | 5 | 28,000 | 9,000 |"},
		{"claim target on the largest row only", "with 1,000,000 events due on one endpoint (the target is at 1,000,000): 1,200 ms: **missed**."},
		{"claim target met", "with 1,000,000 events due on 10,000 endpoints (the target is at 1,000,000): 3.50 ms: met."},
		{"churn row", "| sequencer pick numbering one event (`Sequencer.Drain`) | 929 | 1,100 |"},
		{"churn target", "pick 929 ms, claim 4 ms: **missed**."},
		{"cleanup row", "| 1,000,000 | 87 | 11,494 | 1,000 | 3 | 181 |"},
		{"curve first tenth", "| 1–100 | 3 |"},
		{"curve last tenth", "| 901–1,000 | 181 |"},
		{"cleanup target", "87 s, 60.3×: **missed**."},
		{"notes close it", "### Notes on this run\n\nWhy it is so.\n\n" + scaleEnd + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { require.Contains(t, doc, tt.want) })
	}
	require.NotContains(t, doc, "due on one endpoint (the target is at 1,000,000): 20.5 ms", "only each shape's largest backlog is judged")
}

func TestRenderScaleWithoutCommand(t *testing.T) {
	out, err := Parse(strings.NewReader("BenchmarkScaleFlow/endpoints=1-2 1 100 ns/op 10 appended/s 5 delivered/s 0.5 ratio\n"))
	require.NoError(t, err)
	var b strings.Builder
	renderScale(&b, out, "results/bench.txt", "")
	require.Contains(t, b.String(), "These figures come from `results/bench.txt`, which does not record the command")
	require.Contains(t, b.String(), "| 1 | 10 | 5 | 0.50× | — | — |")

	b.Reset()
	out, err = Parse(strings.NewReader("BenchmarkProblemWrite/ours-2 10 100 ns/op\n"))
	require.NoError(t, err)
	renderScale(&b, out, "x", "notes")
	require.Empty(t, b.String(), "no scale benchmark, no section")
}

func TestSpliceScale(t *testing.T) {
	section := scaleBegin + "\nnew\n" + scaleEnd + "\n"
	tests := []struct{ name, doc, want string }{
		{"appended", "# Benchmarks\n\nold text\n\n", "# Benchmarks\n\nold text\n\n" + section},
		{"replaced, the rest kept", "# B\n\n" + scaleBegin + "\nold\n" + scaleEnd + "\n\n## After\n", "# B\n\n" + section + "\n## After\n"},
		{"replaced at the end", "# B\n\n" + scaleBegin + "\nold\n" + scaleEnd + "\n", "# B\n\n" + section},
		{"empty report", "", "\n\n" + section},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := spliceScale(tt.doc, section)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
	_, err := spliceScale("# B\n"+scaleBegin+"\nold\n", section)
	require.ErrorContains(t, err, "end marker")
}

func TestReportTakesScaleSection(t *testing.T) {
	main, err := Parse(strings.NewReader("BenchmarkProblemWrite/ours-2 10 100 ns/op 1 B/op 1 allocs/op\n" +
		"BenchmarkScaleFlow/endpoints=1-2 1 100 ns/op 10 appended/s 5 delivered/s 0.5 ratio\n"))
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, (&Report{Out: main, ScaleSource: "results/bench.txt", ScaleNotes: "Run notes."}).Render(&b))
	require.Contains(t, b.String(), "| 1 | 10 | 5 | 0.50× |", "without a saved scale run, the section comes from the run itself")
	require.NotContains(t, b.String(), "Run notes.", "the notes are about the saved run")
	require.NotContains(t, b.String(), "| ScaleFlow/endpoints=1 |", "and not from Other benchmarks")

	f, err := os.Open("testdata/scale.txt")
	require.NoError(t, err)
	defer f.Close()
	scale, err := Parse(f)
	require.NoError(t, err)
	b.Reset()
	require.NoError(t, (&Report{Out: main, Scale: scale, ScaleSource: "results/scale.txt", ScaleNotes: "Run notes."}).Render(&b))
	require.Contains(t, b.String(), "| 1 | 9,000 | 963 | 0.11× |", "a saved scale run wins")
	require.Contains(t, b.String(), "### Notes on this run\n\nRun notes.\n")
	require.NotContains(t, b.String(), "| 1 | 10 | 5 | 0.50× |")
}

func TestRunScaleFromFile(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "BENCHMARKS.md")
	require.NoError(t, os.WriteFile(doc, []byte("# Benchmarks\n\nhand-written section\n"), 0o644))
	var stdout, stderr strings.Builder
	args := []string{"-scale", "-in", "testdata/scale.txt", "-o", doc, "-scale-notes", filepath.Join(dir, "none.md")}
	require.NoError(t, run(args, &stdout, &stderr))
	require.NoError(t, run(args, &stdout, &stderr), "a second splice replaces the first")
	got, err := os.ReadFile(doc)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(got), "# Benchmarks\n\nhand-written section\n\n"+scaleBegin), "the rest of the report is kept")
	require.Equal(t, 1, strings.Count(string(got), scaleBegin))
	require.Contains(t, string(got), "go run ./cmd/benchreport -scale -in testdata/scale.txt")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "none.txt"), []byte("BenchmarkX-2 1 1 ns/op\n"), 0o644))
	err = run([]string{"-scale", "-in", filepath.Join(dir, "none.txt"), "-o", "-", "-scale-notes", ""}, &stdout, &stderr)
	require.ErrorContains(t, err, "no scale benchmark results")
}

func TestScaleGoTest(t *testing.T) {
	env, argv := scaleGoTest(scaleSizes{events: 1_000_000, flow: 20_000, samples: 50, seconds: 60, timeout: 2 * 60 * 60e9})
	require.Equal(t, []string{"SVC_BENCH_SCALE_EVENTS=1000000", "SVC_BENCH_SCALE_FLOW=20000",
		"SVC_BENCH_SCALE_SAMPLES=50", "SVC_BENCH_SCALE_SAMPLE_SECONDS=60"}, env)
	require.Equal(t, "go test -run '^$' -bench '^BenchmarkScale' -benchtime 1x -count 1 -timeout 2h0m0s .", shellJoin(argv))
}
