package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// render parses testdata/sample.txt (synthetic runs with known outcomes) and renders the report.
func render(t *testing.T) string {
	t.Helper()
	f, err := os.Open("testdata/sample.txt")
	require.NoError(t, err)
	defer f.Close()
	out, err := Parse(f)
	require.NoError(t, err)
	rep := &Report{Out: out, Command: "go run ./cmd/benchreport", GoTest: "go test -bench .",
		Machine: []string{"CPU: Test CPU"}, Notes: "Why it is so.\n"}
	var b strings.Builder
	require.NoError(t, rep.Render(&b))
	return b.String()
}

func TestRender(t *testing.T) {
	doc := render(t)
	tests := []struct{ name, want string }{
		{"command", "```sh\ngo run ./cmd/benchreport\n```"},
		{"machine", "- CPU: Test CPU"},
		{"limit met", "Webhook signature verification, 1KiB: ours is 1.05× the raw HMAC (target ≤ 1.10×): met."},
		{"limit missed", "Webhook signature verification, 64KiB: ours is 1.14× the raw HMAC (target ≤ 1.10×): **missed**."},
		{"peer ahead", "| stripe-go v85 `webhook` | 2,500 ±1% | 808 | 17 | 2.50× | 0.42× | yes |"},
		{"peer not ahead", "| go-github v75 `ValidateSignature` | 71,000 ±1% | 576 | 8 | 1.01× | 1.13× | **no**: slower (1.13× the time) |"},
		{"miss listed", "- Webhook signature verification, 64KiB, vs go-github v75 `ValidateSignature`: slower (1.13× the time)."},
		{"bytes and allocs", "not fewer bytes (472 vs 416 B/op); not fewer allocations (6 vs 5)"},
		{"single-row family has no limit column", "| library | ns/op | B/op | allocs/op | ours' time ÷ this | ours ahead? |"},
		{"overhead missed", "| replay, 256B, serial | 900 ±1% | 300 ±1% | 3.00× | +600 | 900, 9 | 1,500 ±1% | 1,000 ±1% | 1.50× | +500 | 700, 7 | **no** (3.00× vs 1.50×) |"},
		{"overhead met", "| first, 256B, serial | 3,000 ±1% | 1,000 ±1% | 3.00× | +2,000 | 900, 9 | 4,000 ±1% | 1,000 ±1% | 4.00× | +3,000 | 700, 7 | yes |"},
		{"overhead target", "Idempotency middleware: overhead ratio lower than Fiber's on every row: **missed** on 1 of 2 rows."},
		{"store row", "| memory | ClaimComplete | 400 ±1% | 200 | 3 |"},
		{"store skipped", "| Redis | (not run) | | | |"},
		{"store ran", "| PostgreSQL | Replay | 90,000 ±1% | 1,200 | 20 |"},
		{"unclaimed kept", "| Unclaimed | 5 ±0% | 0 | 0 |"},
		{"tie at the floor", "| Svix v1.44 (Go) | 1,050 ±1% | 808 | 17 | 1.05× | 1.00× | **no**: not significantly faster (p=1.00): ours is at the HMAC floor (1.05× the limit) |"},
		{"closing note", "## Closing note\n\nWhy it is so.\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Contains(t, doc, tt.want)
		})
	}
	// Nothing missing is shown as a peer row, and the ahead rows are not listed as misses.
	require.NotContains(t, doc, "vs stripe-go")
}

func TestRenderMissingOurs(t *testing.T) {
	out, err := Parse(strings.NewReader("BenchmarkProblemWrite/huma-2 10 100 ns/op 1 B/op 1 allocs/op\n"))
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, (&Report{Out: out}).Render(&b))
	require.Contains(t, b.String(), "| huma v2 `ErrorModel` | 100 | 1 | 1 | — | not measured |")
	require.Contains(t, b.String(), "| **ours** | — | — | — | — | — |")
}

func TestFmtNum(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"}, {5, "5"}, {5.25, "5.25"}, {12.34, "12.3"}, {999.6, "1,000"}, {1234567, "1,234,567"}, {-2500, "-2,500"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) { require.Equal(t, tt.want, fmtNum(tt.in)) })
	}
}

func TestShellJoin(t *testing.T) {
	require.Equal(t, `go test -run '^$' -bench . './a b' 'it'\''s'`,
		shellJoin([]string{"go", "test", "-run", "^$", "-bench", ".", "./a b", "it's"}))
}

func TestRunFromFile(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr strings.Builder
	err := run([]string{"-in", "testdata/sample.txt", "-o", "-", "-notes", dir + "/none.md"}, &stdout, &stderr)
	require.NoError(t, err)
	require.Contains(t, stdout.String(), "go run ./cmd/benchreport -in testdata/sample.txt")
	require.Contains(t, stdout.String(), "GOMAXPROCS: 2")
	require.NotContains(t, stdout.String(), "## Closing note")

	require.NoError(t, os.WriteFile(dir+"/empty.txt", []byte("PASS\n"), 0o644))
	err = run([]string{"-in", dir + "/empty.txt", "-o", "-"}, &stdout, &stderr)
	require.ErrorContains(t, err, "no benchmark results")

	err = run([]string{"-in", "testdata/sample.txt", "extra"}, &stdout, &stderr)
	require.ErrorContains(t, err, "unexpected arguments")
}

func TestRunBenchmarks(t *testing.T) {
	var progress strings.Builder
	out, err := runBenchmarks([]string{"go", "env", "GOARCH"}, nil, &progress)
	require.NoError(t, err)
	require.NotEmpty(t, strings.TrimSpace(string(out)))
	require.Contains(t, progress.String(), "benchreport: running go env GOARCH")
	require.Contains(t, progress.String(), strings.TrimSpace(string(out)), "the output is echoed as it comes")

	_, err = runBenchmarks([]string{"go", "no-such-command"}, nil, &progress)
	require.ErrorContains(t, err, "benchreport: go no-such-command")
}

func TestMachine(t *testing.T) {
	m := strings.Join(machine(), "\n")
	require.Contains(t, m, "cores: ")
	require.Contains(t, m, "Go: go")
	require.Contains(t, m, "SVC_TEST_POSTGRES_DSN")
}
