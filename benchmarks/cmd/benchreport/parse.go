package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Result is every run of one benchmark, as `go test -bench -benchmem` printed it.
type Result struct {
	// Name is the full name without the "-<GOMAXPROCS>" suffix: "BenchmarkWebhookVerify/1KiB/ours".
	Name string
	// Procs is the GOMAXPROCS suffix (1 when the line had none).
	Procs int
	// Pkg is the package the benchmark ran in (the "pkg:" line before it).
	Pkg string
	// Runs holds one map of unit to value per line, in input order: "ns/op", "B/op", "allocs/op",
	// "MB/s" and any custom metric b.ReportMetric added.
	Runs []map[string]float64
}

// Values returns the unit's value from every run that reported it.
func (r *Result) Values(unit string) []float64 {
	var vs []float64
	for _, run := range r.Runs {
		if v, ok := run[unit]; ok {
			vs = append(vs, v)
		}
	}
	return vs
}

// Output is a parsed `go test -bench` output: the configuration lines and the results in the order
// each benchmark first appeared.
type Output struct {
	Config  map[string]string // goos, goarch, cpu, and any other "key: value" line
	Results []*Result
	byName  map[string]*Result
}

// Get returns the result of the benchmark named name (without the procs suffix), or nil.
func (o *Output) Get(name string) *Result { return o.byName[name] }

// Parse reads benchmark output in the standard format (golang.org/design/14313-benchmark-format):
// "key: value" configuration lines and "BenchmarkName-N  iterations  value unit ..." result lines.
// Everything else (PASS, ok, test logs, SKIP lines) is ignored, so `go test` output can be fed as is.
// A result line that is malformed after its name is an error: it would silently drop a run.
func Parse(r io.Reader) (*Output, error) {
	out := &Output{Config: map[string]string{}, byName: map[string]*Result{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	pkg := ""
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if strings.HasPrefix(text, "Benchmark") {
			fields := strings.Fields(text)
			if len(fields) < 2 {
				continue // a benchmark's own log line ("BenchmarkX" alone) or a name that wraps
			}
			if _, err := strconv.Atoi(fields[1]); err != nil {
				continue // a log line that happens to start with "Benchmark"
			}
			if err := out.add(fields, pkg); err != nil {
				return nil, fmt.Errorf("benchreport: line %d: %w", line, err)
			}
			continue
		}
		if k, v, ok := configLine(text); ok {
			if k == "pkg" {
				pkg = v
			}
			if _, seen := out.Config[k]; !seen {
				out.Config[k] = v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("benchreport: reading benchmark output: %w", err)
	}
	return out, nil
}

func (o *Output) add(fields []string, pkg string) error {
	name, procs := splitProcs(fields[0])
	if (len(fields)-2)%2 != 0 || len(fields) < 4 {
		return fmt.Errorf("%s: want iterations then value/unit pairs", fields[0])
	}
	run := make(map[string]float64, (len(fields)-2)/2)
	for i := 2; i < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return fmt.Errorf("%s: value %q: %w", fields[0], fields[i], err)
		}
		run[fields[i+1]] = v
	}
	res := o.byName[name]
	if res == nil {
		res = &Result{Name: name, Procs: procs, Pkg: pkg}
		o.byName[name] = res
		o.Results = append(o.Results, res)
	}
	res.Runs = append(res.Runs, run)
	return nil
}

// splitProcs splits "BenchmarkX/a-2" into "BenchmarkX/a" and 2.
func splitProcs(s string) (string, int) {
	i := strings.LastIndexByte(s, '-')
	if i < 0 || strings.LastIndexByte(s, '/') > i {
		return s, 1
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil || n <= 0 {
		return s, 1
	}
	return s[:i], n
}

// configLine recognises "key: value" where key is lowercase letters, digits and dashes, the shape
// `go test` uses for goos, goarch, pkg and cpu.
func configLine(s string) (string, string, bool) {
	i := strings.Index(s, ": ")
	if i <= 0 {
		return "", "", false
	}
	for _, c := range s[:i] {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return "", "", false
		}
	}
	return s[:i], strings.TrimSpace(s[i+2:]), true
}
