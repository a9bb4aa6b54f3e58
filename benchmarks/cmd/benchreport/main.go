// Command benchreport runs the benchmarks of this module, or reads the output of a run, and writes
// docs/BENCHMARKS.md: the exact command, the machine, and per family a table of medians (ns/op, B/op,
// allocs/op) with ratios to the peers and to the limit, in the manner of benchstat.
//
// From the benchmarks directory:
//
//	go run ./cmd/benchreport                          # run 10 passes and write ../docs/BENCHMARKS.md
//	go run ./cmd/benchreport -in results/bench.txt    # only regenerate the report from saved output
//	go run ./cmd/benchreport -scale                   # run the scale benchmarks at full size (long) and
//	                                                  # replace only the report's scale section
//	go run ./cmd/benchreport -scale -in results/scale.txt  # only re-render the scale section
//
// When it runs the benchmarks itself it saves their raw output (-raw), so that the report can be
// regenerated and compared with benchstat later. Set SVC_TEST_REDIS_URL and SVC_TEST_POSTGRES_DSN to
// include the Redis and PostgreSQL stores.
//
// The scale benchmarks (issue 37) at full size take long, so -scale runs them on their own, saves
// their output with the command that made it (-scale-raw), and replaces the report's scale section
// alone, between its markers, leaving every other section as it is. A whole report includes the
// section from the saved output when there is one.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// options are the command-line flags.
type options struct {
	in, out, raw, notes string
	bench, benchtime    string
	count               int
	timeout             time.Duration
	scale               bool
	scaleRaw, scaleNote string
	scaleSizes          scaleSizes
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("benchreport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.in, "in", "", "read `go test -bench` output from this file ('-' for stdin) instead of running the benchmarks")
	fs.StringVar(&o.out, "o", "../docs/BENCHMARKS.md", "write the report to this file ('-' for stdout)")
	fs.StringVar(&o.raw, "raw", "results/bench.txt", "when running the benchmarks, save their raw output here ('' to not save)")
	fs.StringVar(&o.notes, "notes", "results/notes.md", "append this markdown file as the closing note ('' or a missing file for none)")
	fs.StringVar(&o.bench, "bench", ".", "the -bench pattern when running the benchmarks")
	fs.StringVar(&o.benchtime, "benchtime", "100ms", "the -benchtime when running the benchmarks")
	fs.IntVar(&o.count, "count", 10, "how many times to run the whole suite (6 or more for a confidence interval)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "the go test -timeout when running the benchmarks")
	fs.BoolVar(&o.scale, "scale", false, "run the scale benchmarks (BenchmarkScale…) at full size, or read them from -in, and replace only the report's scale section")
	fs.StringVar(&o.scaleRaw, "scale-raw", "results/scale.txt", "the scale benchmarks' saved output: -scale writes it, a whole report reads it ('' for none)")
	fs.StringVar(&o.scaleNote, "scale-notes", "results/scale-notes.md", "close the scale section with this markdown file ('' or a missing file for none)")
	fs.IntVar(&o.scaleSizes.events, "scale-events", 1_000_000, "with -scale: "+envScaleEvents)
	fs.IntVar(&o.scaleSizes.flow, "scale-flow", 20_000, "with -scale: "+envScaleFlow)
	fs.IntVar(&o.scaleSizes.samples, "scale-samples", 50, "with -scale: "+envScaleSamples)
	fs.IntVar(&o.scaleSizes.seconds, "scale-seconds", 60, "with -scale: "+envScaleSeconds)
	fs.DurationVar(&o.scaleSizes.timeout, "scale-timeout", 2*time.Hour, "with -scale: the go test -timeout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("benchreport: unexpected arguments %q", fs.Args())
	}
	if o.scale {
		return runScaleSection(o, args, stderr, stdout)
	}
	if o.count < 1 {
		return errors.New("benchreport: -count must be at least 1")
	}

	rep := &Report{Machine: machine()}
	var raw []byte
	if o.in != "" {
		var err error
		if raw, err = readInput(o.in); err != nil {
			return err
		}
		rep.Command = "go run ./cmd/benchreport -in " + o.in
	} else {
		// The runs are interleaved (-count 1, count times over the whole suite) rather than -count N
		// back to back, so that a burst of load on the machine spreads over every library instead of
		// landing on the runs of one.
		goTest := []string{"go", "test", "-run", "^$", "-bench", o.bench, "-benchmem",
			"-count", "1", "-benchtime", o.benchtime, "-timeout", o.timeout.String(), "./..."}
		rep.GoTest = fmt.Sprintf("for i in $(seq %d); do %s; done", o.count, shellJoin(goTest))
		rep.Command = shellJoin(append([]string{"go", "run", "./cmd/benchreport"}, args...))
		before := loadAvg()
		for i := 1; i <= o.count; i++ {
			fmt.Fprintf(stderr, "benchreport: pass %d of %d\n", i, o.count)
			out, err := runBenchmarks(goTest, nil, stderr)
			if err != nil {
				return err
			}
			raw = append(raw, out...)
		}
		if before != "" {
			// The load others put on the machine explains wide intervals better than any guess.
			rep.Machine = append(rep.Machine, fmt.Sprintf("load average (1, 5, 15 min): %s before the run, %s after", before, loadAvg()))
		}
		if o.raw != "" {
			if err := os.WriteFile(o.raw, raw, 0o644); err != nil {
				return fmt.Errorf("benchreport: saving raw output: %w", err)
			}
		}
	}
	out, err := Parse(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	if len(out.Results) == 0 {
		return errors.New("benchreport: the output has no benchmark results")
	}
	rep.Out = out
	if rep.Scale, err = readScale(o.scaleRaw); err != nil {
		return err
	}
	rep.ScaleSource = o.scaleRaw
	if rep.Scale == nil {
		rep.ScaleSource = cmp.Or(o.in, o.raw)
	} else if rep.ScaleNotes, err = readNotes(o.scaleNote); err != nil {
		return err
	}
	if cpu := out.Config["cpu"]; cpu != "" {
		rep.Machine = append(rep.Machine, "`go test` reported cpu: "+cpu)
	}
	rep.Machine = append(rep.Machine, "GOMAXPROCS: "+procsOf(out))
	if o.notes != "" {
		notes, err := os.ReadFile(o.notes)
		switch {
		case err == nil:
			rep.Notes = string(notes)
		case !errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("benchreport: %w", err)
		}
	}
	var buf bytes.Buffer
	if err := rep.Render(&buf); err != nil {
		return err
	}
	if o.out == "-" {
		_, err = stdout.Write(buf.Bytes())
		return err
	}
	if err := os.WriteFile(o.out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("benchreport: %w", err)
	}
	fmt.Fprintf(stderr, "benchreport: wrote %s (%d benchmarks)\n", o.out, len(out.Results))
	return nil
}

// runScaleSection is -scale: it runs the scale benchmarks (or reads their output from -in), saves
// what it ran, and writes the scale section into the report -o names, replacing the one there.
func runScaleSection(o options, args []string, stderr, stdout io.Writer) error {
	var (
		raw    []byte
		err    error
		source = o.scaleRaw
	)
	if o.in != "" {
		source = o.in
		if raw, err = readInput(o.in); err != nil {
			return err
		}
	} else {
		if source == "" {
			return errors.New("benchreport: -scale runs the benchmarks only to save their output: set -scale-raw")
		}
		command := shellJoin(append([]string{"go", "run", "./cmd/benchreport"}, args...))
		if raw, err = runScale(o.scaleSizes, command, stderr); err != nil {
			return err
		}
	}
	out, err := Parse(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	notes, err := readNotes(o.scaleNote)
	if err != nil {
		return err
	}
	var section strings.Builder
	renderScale(&section, out, source, notes)
	if section.Len() == 0 {
		if o.in == "" {
			// The saved results stay as they were: a run that measured nothing replaces nothing.
			return fmt.Errorf("benchreport: the run has no scale benchmark results (they skip without "+
				"SVC_TEST_POSTGRES_DSN); %s is unchanged", source)
		}
		return errors.New("benchreport: the output has no scale benchmark results")
	}
	if o.in == "" {
		if err := os.WriteFile(source, raw, 0o644); err != nil {
			return fmt.Errorf("benchreport: saving raw output: %w", err)
		}
	}
	if o.out == "-" {
		_, err = io.WriteString(stdout, section.String())
		return err
	}
	doc, err := os.ReadFile(o.out)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("benchreport: %w", err)
	}
	spliced, err := spliceScale(string(doc), section.String())
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.out, []byte(spliced), 0o644); err != nil {
		return fmt.Errorf("benchreport: %w", err)
	}
	fmt.Fprintf(stderr, "benchreport: wrote the scale section of %s\n", o.out)
	return nil
}

// runBenchmarks runs go test with env added to the environment, echoing its output to progress as
// it comes, and returns the output. A failing run is an error: a report must not be written from a
// partial run.
func runBenchmarks(argv, env []string, progress io.Writer) ([]byte, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	var buf bytes.Buffer
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			buf.Write(sc.Bytes())
			buf.WriteByte('\n')
			fmt.Fprintln(progress, sc.Text())
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	fmt.Fprintln(progress, "benchreport: running", strings.TrimSpace(strings.Join(env, " ")+" "+shellJoin(argv)))
	err := cmd.Run()
	_ = pw.Close()
	<-done
	if err != nil {
		return nil, fmt.Errorf("benchreport: %s: %w", shellJoin(argv), err)
	}
	return buf.Bytes(), nil
}

// machine describes where the report is generated: the CPU model and core count from /proc/cpuinfo,
// memory, kernel, Go version, and which database servers the store benchmarks could reach.
func machine() []string {
	var lines []string
	model, cores := cpuInfo()
	if model != "" {
		lines = append(lines, "CPU: "+model)
	}
	if cores == 0 {
		cores = runtime.NumCPU()
	}
	lines = append(lines, fmt.Sprintf("cores: %d (runtime.NumCPU %d)", cores, runtime.NumCPU()))
	if mem := memTotal(); mem != "" {
		lines = append(lines, "memory: "+mem)
	}
	if k, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		lines = append(lines, "kernel: "+runtime.GOOS+" "+strings.TrimSpace(string(k)))
	}
	lines = append(lines, "Go: "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH)
	for _, s := range []struct{ name, env string }{{"PostgreSQL", "SVC_TEST_POSTGRES_DSN"}, {"Redis", "SVC_TEST_REDIS_URL"}} {
		state := "unset (its store benchmarks skip)"
		if os.Getenv(s.env) != "" {
			state = "set (a local server)"
		}
		lines = append(lines, fmt.Sprintf("%s: %s %s", s.name, s.env, state))
	}
	return lines
}

func cpuInfo() (model string, cores int) {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "", 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "processor":
			cores++
		case "model name":
			if model == "" {
				model = strings.TrimSpace(v)
			}
		}
	}
	return model, cores
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseFloat(f[0], 64); err == nil {
					return fmt.Sprintf("%.1f GiB", kb/(1<<20))
				}
			}
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func procsOf(out *Output) string {
	var ps []int
	for _, r := range out.Results {
		if !slices.Contains(ps, r.Procs) {
			ps = append(ps, r.Procs)
		}
	}
	slices.Sort(ps)
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ", ")
}

// shellJoin quotes argv for a POSIX shell, so that the printed command can be pasted as is.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@", r))
		}) < 0 {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

// loadAvg returns the first three fields of /proc/loadavg, or "" where there is none.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], ", ")
}

// readInput reads saved go test -bench output: the file in names, or standard input for "-".
func readInput(in string) ([]byte, error) {
	var (
		raw []byte
		err error
	)
	if in == "-" {
		raw, err = io.ReadAll(os.Stdin)
	} else {
		raw, err = os.ReadFile(in)
	}
	if err != nil {
		return nil, fmt.Errorf("benchreport: %w", err)
	}
	return raw, nil
}
