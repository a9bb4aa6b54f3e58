package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	in := `goos: linux
goarch: amd64
pkg: example.com/bench
cpu: AMD EPYC
BenchmarkA/x/ours-2   	  1000	      1117 ns/op	 916.49 MB/s	       0 B/op	       0 allocs/op
BenchmarkA/x/ours-2   	  1000	      1200 ns/op	 900.00 MB/s	       0 B/op	       0 allocs/op
BenchmarkB-8 10 5.5 ns/op 16 B/op 1 allocs/op
BenchmarkNoProcs 10 7 ns/op
    bench_test.go:12: BenchmarkA logs a line
BenchmarkLogged
--- SKIP: BenchmarkStore/redis
PASS
ok  	example.com/bench	7.246s
`
	out, err := Parse(strings.NewReader(in))
	require.NoError(t, err)
	require.Equal(t, "linux", out.Config["goos"])
	require.Equal(t, "AMD EPYC", out.Config["cpu"])
	require.Len(t, out.Results, 3)

	a := out.Get("BenchmarkA/x/ours")
	require.NotNil(t, a)
	require.Equal(t, 2, a.Procs)
	require.Equal(t, "example.com/bench", a.Pkg)
	require.Equal(t, []float64{1117, 1200}, a.Values("ns/op"))
	require.Equal(t, []float64{0, 0}, a.Values("allocs/op"))
	require.Equal(t, []float64{916.49, 900}, a.Values("MB/s"))

	b := out.Get("BenchmarkB")
	require.NotNil(t, b)
	require.Equal(t, 8, b.Procs)
	require.Equal(t, []float64{5.5}, b.Values("ns/op"))

	c := out.Get("BenchmarkNoProcs")
	require.NotNil(t, c)
	require.Equal(t, 1, c.Procs)
	require.Empty(t, c.Values("B/op"))
}

func TestParseRejectsMalformedResults(t *testing.T) {
	tests := []struct{ name, line string }{
		{"odd pairs", "BenchmarkA-2 100 5 ns/op 3"},
		{"no values", "BenchmarkA-2 100"},
		{"bad value", "BenchmarkA-2 100 fast ns/op"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.line + "\n"))
			require.ErrorContains(t, err, "benchreport: line 1")
		})
	}
}

func TestSplitProcs(t *testing.T) {
	tests := []struct {
		in    string
		name  string
		procs int
	}{
		{"BenchmarkA-2", "BenchmarkA", 2},
		{"BenchmarkA/64KiB/ours-16", "BenchmarkA/64KiB/ours", 16},
		{"BenchmarkA", "BenchmarkA", 1},
		{"BenchmarkA/with-dash/x", "BenchmarkA/with-dash/x", 1},
		{"BenchmarkA/x-y", "BenchmarkA/x-y", 1},
		{"BenchmarkA-0", "BenchmarkA-0", 1},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			name, procs := splitProcs(tt.in)
			require.Equal(t, tt.name, name)
			require.Equal(t, tt.procs, procs)
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add("BenchmarkA/x/ours-2 1000 1117 ns/op 0 B/op 0 allocs/op\n")
	f.Add("cpu: AMD EPYC\npkg: x\nBenchmarkB 1 2 ns/op\n")
	f.Add("BenchmarkC-2 10 NaN ns/op\n")
	f.Fuzz(func(t *testing.T, in string) {
		out, err := Parse(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, r := range out.Results {
			require.NotEmpty(t, r.Runs)
			require.Same(t, r, out.Get(r.Name))
		}
	})
}
