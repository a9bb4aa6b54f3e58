// Command apirecord records the exported API of every published module of this repository in a
// text file under api/ at its root, one line per exported identifier, like the Go repository's
// api/go1.N.txt, so that every change to the public surface shows in review as lines added to or
// removed from those files. A test of this module fails when the files are stale.
//
// Usage, from the repository root:
//
//	go run ./tools/apirecord          write api/*.txt for the working tree
//	go run ./tools/apirecord -check   write nothing; report the lines each file lacks (+) or has
//	                                  too many (-), and fail if there are any
//
// Every published module whose path has no internal element gets a file: api/conventions.txt for
// the root module, api/pgstore.txt, api/redisstore.txt, api/otelconv.txt, api/examples.txt for the
// modules in those directories. A file lists the packages of its module except commands (package
// main), packages under an internal/ directory, tests and testdata. The line formats are those of
// packageLines; api/README.md shows them. The record is of linux/amd64 (see recordGOOS).
//
// Exit status: 0 when the files were written or are current, 1 when they are stale or something
// failed, 2 for a wrong command line.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/svcplatform/conventions/tools/internal/repo"
)

// regenerate is the command that brings the record up to date, as the failures print it.
const regenerate = "go run ./tools/apirecord"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("apirecord", flag.ContinueOnError)
	flags.SetOutput(stderr)
	checkOnly := flags.Bool("check", false, "write nothing; fail, printing the difference, if api/ is stale")
	flags.Usage = func() {
		fmt.Fprintln(stderr, "usage: apirecord [-check]   (from the repository root: "+regenerate+")")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if flags.NArg() > 0 {
		flags.Usage()
		return 2
	}
	root, err := repo.FindRoot()
	if err != nil {
		fmt.Fprintln(stderr, "apirecord:", err)
		return 1
	}
	r, err := repo.Load(root)
	if err != nil {
		fmt.Fprintln(stderr, "apirecord:", err)
		return 1
	}
	want, err := generate(r)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *checkOnly {
		report, err := compare(root, want)
		if err != nil {
			fmt.Fprintln(stderr, "apirecord:", err)
			return 1
		}
		if report != "" {
			fmt.Fprint(stderr, report)
			return 1
		}
		fmt.Fprintf(stdout, "%s/ is current: %d files\n", recordDir, len(want))
		return 0
	}
	written, err := write(root, want)
	for _, name := range written {
		fmt.Fprintln(stdout, "wrote", name)
	}
	if err != nil {
		fmt.Fprintln(stderr, "apirecord:", err)
		return 1
	}
	if len(written) == 0 {
		fmt.Fprintf(stdout, "%s/ is current: %d files\n", recordDir, len(want))
	}
	return 0
}

// onDisk returns the record files under root's api/ directory, by their path relative to root with
// slashes: every .txt file there belongs to the record (api/README.md does not).
func onDisk(root string) (map[string][]byte, error) {
	names, err := filepath.Glob(filepath.Join(root, recordDir, "*.txt"))
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		files[path.Join(recordDir, filepath.Base(name))] = data
	}
	return files, nil
}

// write brings root's api/ directory to want, writing the files that differ and removing the .txt
// files of modules that are no longer recorded. It returns what it wrote or removed.
func write(root string, want map[string][]byte) ([]string, error) {
	have, err := onDisk(root)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(root, recordDir), 0o755); err != nil {
		return nil, err
	}
	var done []string
	for _, name := range sortedKeys(want, have) {
		data, wanted := want[name]
		old, exists := have[name]
		file := filepath.Join(root, filepath.FromSlash(name))
		switch {
		case !wanted:
			if err := os.Remove(file); err != nil {
				return done, err
			}
			done = append(done, name+" (removed: no module records there)")
		case !exists || !bytes.Equal(old, data):
			if err := os.WriteFile(file, data, 0o644); err != nil {
				return done, err
			}
			done = append(done, name)
		}
	}
	return done, nil
}

// compare returns what separates root's api/ directory from want, file by file, ending with how to
// regenerate it, or "" when they are the same.
func compare(root string, want map[string][]byte) (string, error) {
	have, err := onDisk(root)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, name := range sortedKeys(want, have) {
		data, wanted := want[name]
		old, exists := have[name]
		switch {
		case !wanted:
			fmt.Fprintf(&b, "%s: no published module records there any more\n", name)
		case !exists:
			fmt.Fprintf(&b, "%s: missing; it would have %d lines\n", name, bytes.Count(data, []byte("\n")))
		case !bytes.Equal(old, data):
			fmt.Fprintf(&b, "%s is stale (+ the API has it, the record does not; - the record has it, the API does not):\n", name)
			b.WriteString(diffLines(old, data))
		}
	}
	if b.Len() == 0 {
		return "", nil
	}
	fmt.Fprintf(&b, "The exported API differs from %s/. Regenerate the record from the repository root with\n\t%s\n"+
		"review its diff, and note every incompatible change in CHANGELOG.md (RELEASING.md).\n", recordDir, regenerate)
	return b.String(), nil
}

// diffLines lists, in the record's order, the lines only old has (-) and those only new has (+).
// The record is a sorted set of lines, so this is the whole of a difference, short of lines that are
// out of order or repeated, which it says.
func diffLines(old, new []byte) string {
	oldLines, newLines := splitLines(old), splitLines(new)
	inOld, inNew := set(oldLines), set(newLines)
	type change struct {
		sign byte
		line string
	}
	var changes []change
	for _, l := range oldLines {
		if !inNew[l] {
			changes = append(changes, change{'-', l})
		}
	}
	for _, l := range newLines {
		if !inOld[l] {
			changes = append(changes, change{'+', l})
		}
	}
	slices.SortStableFunc(changes, func(a, b change) int { return strings.Compare(a.line, b.line) })
	changes = slices.CompactFunc(changes, func(a, b change) bool { return a == b })
	if len(changes) == 0 {
		return "\t(the same lines, but out of order, repeated or spaced otherwise)\n"
	}
	var b strings.Builder
	for _, c := range changes {
		fmt.Fprintf(&b, "\t%c%s\n", c.sign, c.line)
	}
	return b.String()
}

func splitLines(data []byte) []string {
	s := strings.TrimSuffix(string(data), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func set(lines []string) map[string]bool {
	m := make(map[string]bool, len(lines))
	for _, l := range lines {
		m[l] = true
	}
	return m
}

// sortedKeys returns the names in any of the maps, sorted.
func sortedKeys(maps ...map[string][]byte) []string {
	var names []string
	for _, m := range maps {
		for name := range m {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}
