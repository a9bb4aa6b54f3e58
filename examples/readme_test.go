//go:build unix

package examples

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestReadme runs README.md's commands, so that the README cannot drift from what the programs do.
//
// Every ```sh block is run, in the order of the README, from the repository root, by one bash whose
// variables carry over from block to block (the curl session sets BASE, KEY, EP, … and uses them
// later). A block preceded by <!-- background: why --> runs on its own, like a second terminal: the
// test waits until it has printed what the README shows, and stops it with SIGINT (Ctrl-C) at the
// end. A block preceded by <!-- not run: why --> is not run; the test names each one. Any other
// fence must say what it holds (sh, or text for output): an unmarked command block cannot hide.
//
// In a block, a comment "#   …" (three spaces or more) shows the output of the command above it, and
// "# …" is prose. Each shown line must match a line of the output, in order; "…" stands for anything,
// and IDs, keys, secrets, signatures, Unix times, HTTP dates, UUIDs and ephemeral ports are compared
// by their shape only (normalize). A note after two spaces, "  (like this)", is not compared. A
// shown JSON value may be wrapped over several comment lines. A command that fails, prints something
// else or hangs fails the test with its README line.
//
// The commands need bash and curl: without them the test skips, except under CI=true, where it fails.
func TestReadme(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: README.md's commands build and start the programs")
	}
	for _, tool := range []string{"bash", "curl", "grep", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed: README.md's commands need it, and under CI=true nothing may skip", tool)
			}
			t.Skipf("%s is not installed: README.md's commands need it (install it to run them; CI fails without it)", tool)
		}
	}
	blocks, err := parseReadme("README.md")
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	summary, err := runReadme(blocks, root, readmeEnv(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Log(summary)
}

// runReadme runs blocks in dir, as TestReadme describes, and returns what it ran and did not run.
func runReadme(blocks []readmeBlock, dir string, env []string) (summary string, err error) {
	var sh *session
	var background []*backgroundBlock
	defer func() {
		if sh != nil {
			err = errors.Join(err, sh.close())
		}
		for _, bg := range background {
			err = errors.Join(err, bg.stop(err != nil))
		}
	}()
	var ran, steps int
	var notRun []string
	for _, b := range blocks {
		switch b.marker {
		case markerNotRun:
			notRun = append(notRun, fmt.Sprintf("%s (%s)", b.at, b.reason))
			continue
		case markerBackground:
			bg, err := startBackground(b, dir, env)
			if err != nil {
				return "", err
			}
			background = append(background, bg)
			if err := bg.waitFor(b.expected()); err != nil {
				return "", err
			}
		default:
			if sh == nil {
				if sh, err = startSession(dir, env); err != nil {
					return "", err
				}
			}
			for _, st := range b.steps {
				out, err := sh.run(st)
				if err != nil {
					return "", err
				}
				if err := match(st.expected, strings.Split(out, "\n")); err != nil {
					return "", fmt.Errorf("%s: the output differs from what the README shows: %v\nthe command printed:\n%s", st.at, err, out)
				}
				steps++
			}
		}
		ran++
	}
	if ran == 0 || steps == 0 {
		return "", errors.New("no command block runs: the parser or the README is wrong")
	}
	return fmt.Sprintf("ran %d sh blocks: %d in one shell, checked in %d steps, and %d in the background; %d not run: %s",
		ran, ran-len(background), steps, len(background), len(notRun), strings.Join(notRun, ", ")), nil
}

// Bounds of the waits. Generous, for a loaded machine that builds the programs with go run; they
// catch a hang, they never measure speed.
const (
	stepTimeout  = 3 * time.Minute
	startTimeout = 5 * time.Minute
	stopTimeout  = 30 * time.Second
)

// readmeEnv is the environment of the README's commands: this process's, with TMPDIR (where the
// session keeps its env file) and XDG_CONFIG_HOME (where svc keeps its cursors, and would read a
// config file) in the test's own directory, a workspace that go run can find, and no proxy for
// loopback.
func readmeEnv(tmp string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "TMPDIR", "XDG_CONFIG_HOME", "GOWORK", "NO_PROXY", "no_proxy", "BASH_ENV", "ENV", "CDPATH":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "TMPDIR="+tmp, "XDG_CONFIG_HOME="+filepath.Join(tmp, "config"), "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost")
}

// --- README.md, parsed ----------------------------------------------------------------------------

const (
	markerNotRun     = "not run"
	markerBackground = "background"
)

// readmeBlock is one ```sh block.
type readmeBlock struct {
	at             string // file:line of the opening fence
	marker, reason string
	text           string
	steps          []readmeStep
}

// expected is every line the block shows, across its steps.
func (b readmeBlock) expected() []expectedLine {
	var all []expectedLine
	for _, st := range b.steps {
		all = append(all, st.expected...)
	}
	return all
}

// readmeStep is a command and the output the README shows for it.
type readmeStep struct {
	at       string // file:line of its first line
	command  string
	expected []expectedLine
}

// expectedLine is a shown line of output (joined, when a JSON value is wrapped over several).
type expectedLine struct {
	at   string // file:line of its first line
	text string
}

var (
	markerRE     = regexp.MustCompile(`^<!--\s*(not run|background):\s*(.*?)\s*-->$`)
	fenceRE      = regexp.MustCompile("^```\\s*(\\S*)")
	outputRE     = regexp.MustCompile(`^#\s{3,}(.*)$`)
	annotationRE = regexp.MustCompile(`\s{2,}\([^()]*\)$`)
)

// parseReadme returns the sh blocks of path, and refuses fences it could not classify.
func parseReadme(path string) ([]readmeBlock, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	name := filepath.Base(path)
	at := func(line int) string { return fmt.Sprintf("%s:%d", name, line) }
	lines := strings.Split(string(raw), "\n")
	var blocks []readmeBlock
	var pending *readmeBlock // a marker waiting for its block
	for i := 0; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], " \r")
		if m := markerRE.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			if pending != nil {
				return nil, fmt.Errorf("%s: a <!-- %s --> marker not followed by a ```sh block", pending.at, pending.marker)
			}
			if m[2] == "" {
				return nil, fmt.Errorf("%s: <!-- %s: --> says why", at(i+1), m[1])
			}
			pending = &readmeBlock{at: at(i + 1), marker: m[1], reason: m[2]}
			continue
		}
		m := fenceRE.FindStringSubmatch(l)
		if m == nil {
			if pending != nil && l != "" {
				return nil, fmt.Errorf("%s: a <!-- %s --> marker not followed by a ```sh block", pending.at, pending.marker)
			}
			continue
		}
		start, lang := i+1, m[1]
		var body []string
		for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
			body = append(body, strings.TrimRight(lines[i], "\r"))
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s: the fence is never closed", at(start))
		}
		switch lang {
		case "sh":
		case "":
			return nil, fmt.Errorf("%s: a fence without a language: say sh for commands (run by this test), text for output", at(start))
		case "bash", "shell", "console", "zsh", "shell-session", "shellsession":
			return nil, fmt.Errorf("%s: a ```%s block: write ```sh, so that this test runs it (or marks it <!-- not run: why -->)", at(start), lang)
		default:
			if pending != nil {
				return nil, fmt.Errorf("%s: a <!-- %s --> marker before a ```%s block", pending.at, pending.marker, lang)
			}
			continue
		}
		b := readmeBlock{at: at(start), text: strings.Join(body, "\n")}
		if pending != nil {
			b.marker, b.reason, pending = pending.marker, pending.reason, nil
		}
		if b.steps, err = parseSteps(at, start+1, body); err != nil {
			return nil, err
		}
		blocks = append(blocks, b)
	}
	if pending != nil {
		return nil, fmt.Errorf("%s: a <!-- %s --> marker not followed by a ```sh block", pending.at, pending.marker)
	}
	return blocks, nil
}

// parseSteps splits a block's body, whose first line is line first, into commands and the output shown
// after each.
func parseSteps(at func(line int) string, first int, body []string) ([]readmeStep, error) {
	var steps []readmeStep
	for j, l := range body {
		n := first + j
		if m := outputRE.FindStringSubmatch(l); m != nil {
			if len(steps) == 0 {
				return nil, fmt.Errorf("%s: output shown before any command", at(n))
			}
			st := &steps[len(steps)-1]
			text := strings.TrimSpace(annotationRE.ReplaceAllString(m[1], ""))
			if k := len(st.expected) - 1; k >= 0 && openJSON(st.expected[k].text) {
				st.expected[k].text += text // a wrapped JSON value goes on
				continue
			}
			st.expected = append(st.expected, expectedLine{at: at(n), text: text})
			continue
		}
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "#") {
			continue // prose
		}
		if trimmed == "" {
			if len(steps) > 0 && len(steps[len(steps)-1].expected) == 0 {
				steps[len(steps)-1].command += "\n"
			}
			continue
		}
		if len(steps) == 0 || len(steps[len(steps)-1].expected) > 0 {
			steps = append(steps, readmeStep{at: at(n)})
		}
		steps[len(steps)-1].command += l + "\n"
	}
	for _, st := range steps {
		for _, e := range st.expected {
			if openJSON(e.text) {
				return nil, fmt.Errorf("%s: the JSON shown is never closed", e.at)
			}
		}
	}
	return steps, nil
}

// openJSON reports whether text starts a JSON object or array that it does not close.
func openJSON(text string) bool {
	if !strings.HasPrefix(text, "{") && !strings.HasPrefix(text, "[") {
		return false
	}
	depth, inString, escaped := 0, false, false
	for _, r := range text {
		switch {
		case escaped:
			escaped = false
		case inString && r == '\\':
			escaped = true
		case r == '"':
			inString = !inString
		case inString:
		case r == '{' || r == '[':
			depth++
		case r == '}' || r == ']':
			depth--
		}
	}
	return depth > 0
}

// --- comparing --------------------------------------------------------------------------------------

// Values that differ from run to run, and the shape they are compared by.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\bsk_(sandbox|live)_[a-z0-9]{20,}\b`), "sk_${1}_…"},
	{regexp.MustCompile(`\b(ord|we|evt|req|lic|key|adm|att)_[a-z0-9]{16,}\b`), "${1}_…"},
	{regexp.MustCompile(`\bwhsec_[A-Za-z0-9_-]{20,}`), "whsec_…"},
	{regexp.MustCompile(`\bv1=[0-9a-f]{64}\b`), "v1=…"},
	{regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`), "…"},
	{regexp.MustCompile(`\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT\b`), "…"},
	{regexp.MustCompile(`\b1[5-9]\d{8}\b`), "…"}, // Unix seconds, 2017 to 2033
	{regexp.MustCompile(`\b(127\.0\.0\.1|localhost):\d{5}\b`), "${1}:…"},
}

func normalize(s string) string {
	for _, v := range volatile {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return strings.TrimSpace(s)
}

// pattern turns a shown line into a regular expression for a whole output line.
func pattern(shown string) *regexp.Regexp {
	parts := strings.Split(normalize(shown), "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
}

// match checks that every shown line matches a line of out, in order.
func match(shown []expectedLine, out []string) error {
	next := 0
	for _, e := range shown {
		re := pattern(e.text)
		found := false
		for ; next < len(out) && !found; next++ {
			found = re.MatchString(normalize(out[next]))
		}
		if !found {
			return fmt.Errorf("no line (after those matched before it) matches %s:\n    %s", e.at, e.text)
		}
	}
	return nil
}

// --- running ----------------------------------------------------------------------------------------

// session is the one bash in which the foreground blocks run, in order, sharing their variables.
type session struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    chan []byte // what bash prints, stdout and stderr interleaved as a terminal shows them
	mark   string
	buffer []byte
}

func startSession(dir string, env []string) (*session, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its children go with it at the end
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	_ = w.Close()
	var b [8]byte
	_, _ = rand.Read(b[:])
	s := &session{cmd: cmd, stdin: stdin, out: make(chan []byte, 64), mark: "readme-step-done-" + hex.EncodeToString(b[:])}
	go func() {
		defer close(s.out)
		for {
			buf := make([]byte, 32<<10)
			n, err := r.Read(buf)
			if n > 0 {
				s.out <- buf[:n]
			}
			if err != nil {
				_ = r.Close()
				return
			}
		}
	}()
	// Unset variables are errors, so that a README command using one it never set fails here.
	if _, err := io.WriteString(stdin, "set -u\n"); err != nil {
		return nil, err
	}
	return s, nil
}

// run runs one step and returns what it printed.
func (s *session) run(st readmeStep) (string, error) {
	script := fmt.Sprintf("{\n%s\n} </dev/null\nprintf '\\n%s %%d\\n' \"$?\"\n", st.command, s.mark)
	if _, err := io.WriteString(s.stdin, script); err != nil {
		return "", fmt.Errorf("%s: bash is gone: %v", st.at, err)
	}
	deadline := time.NewTimer(stepTimeout)
	defer deadline.Stop()
	marker := []byte("\n" + s.mark + " ")
	for {
		if i := bytes.Index(s.buffer, marker); i >= 0 {
			if j := bytes.IndexByte(s.buffer[i+len(marker):], '\n'); j >= 0 {
				out := string(s.buffer[:i])
				status := string(s.buffer[i+len(marker) : i+len(marker)+j])
				s.buffer = s.buffer[i+len(marker)+j+1:]
				if status != "0" {
					return out, fmt.Errorf("%s: the command failed (exit status %s):\n%s\nit printed:\n%s", st.at, status, st.command, out)
				}
				return out, nil
			}
		}
		select {
		case chunk, ok := <-s.out:
			if !ok {
				return "", fmt.Errorf("%s: bash exited during the command:\n%s\nit printed:\n%s", st.at, st.command, s.buffer)
			}
			s.buffer = append(s.buffer, chunk...)
		case <-deadline.C:
			return "", fmt.Errorf("%s: the command did not finish within %s:\n%s\nit printed so far:\n%s", st.at, stepTimeout, st.command, s.buffer)
		}
	}
}

// close ends bash, and whatever the README's commands left running in its process group.
func (s *session) close() error {
	_ = s.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	go func() {
		for range s.out { // drain, so that bash never blocks on a full pipe
		}
	}()
	var err error
	select {
	case <-done:
	case <-time.After(stopTimeout):
		err = fmt.Errorf("bash did not exit within %s of the end of the commands", stopTimeout)
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	return err
}

// backgroundBlock is a block that runs while the following ones do, as in a second terminal.
type backgroundBlock struct {
	at    string
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	more  chan struct{} // a token after every new line, and closed at the end of the output
	done  chan error
}

func startBackground(b readmeBlock, dir string, env []string) (*backgroundBlock, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("bash", "--noprofile", "--norc", "-u", "-c", b.text)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, w, w
	// A process group of its own, like a terminal's foreground job: SIGINT reaches all of it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %v", b.at, err)
	}
	_ = w.Close()
	bg := &backgroundBlock{at: b.at, cmd: cmd, more: make(chan struct{}, 1), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			bg.mu.Lock()
			bg.lines = append(bg.lines, sc.Text())
			bg.mu.Unlock()
			select {
			case bg.more <- struct{}{}:
			default:
			}
		}
		_ = r.Close()
		close(bg.more)
	}()
	go func() { bg.done <- cmd.Wait() }()
	return bg, nil
}

// output is what the block printed so far, stdout and stderr interleaved.
func (bg *backgroundBlock) output() string {
	bg.mu.Lock()
	defer bg.mu.Unlock()
	return strings.Join(bg.lines, "\n")
}

// waitFor waits until the block has printed every shown line, in order.
func (bg *backgroundBlock) waitFor(shown []expectedLine) error {
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	for {
		err := match(shown, strings.Split(bg.output(), "\n"))
		if err == nil {
			return nil
		}
		select {
		case _, ok := <-bg.more:
			if !ok {
				return fmt.Errorf("%s: the block ended before it printed what the README shows: %v\nit printed:\n%s",
					bg.at, err, bg.output())
			}
		case <-deadline.C:
			return fmt.Errorf("%s: not printed within %s: %v\nit printed:\n%s", bg.at, startTimeout, err, bg.output())
		}
	}
}

// stop interrupts the block as Ctrl-C would, and checks that it ends; with show, the error includes
// what it printed. Its exit status says nothing: go run reports 1 when interrupted, whatever the
// program did (the e2e suite checks the programs' own clean exits).
func (bg *backgroundBlock) stop(show bool) error {
	pgid := bg.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGINT)
	var err error
	select {
	case <-bg.done:
	case <-time.After(stopTimeout):
		err = fmt.Errorf("%s: still running %s after SIGINT (Ctrl-C)", bg.at, stopTimeout)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if err != nil || show {
		err = errors.Join(err, fmt.Errorf("%s (in the background) printed:\n%s", bg.at, bg.output()))
	}
	return err
}
