// Command release sets the version at which this repository's modules require each other, checks
// that every module can be installed from outside the repository, prints the tags that release them,
// and writes a local module proxy of them for the install test. RELEASING.md says how to cut a
// release with it.
//
// Usage, from anywhere in the repository:
//
//	go run ./tools/release check           check the modules; print the release version
//	go run ./tools/release version v0.2.0  require each other at v0.2.0; print the tags to create
//	go run ./tools/release tags            print the tags of the release version
//	go run ./tools/release proxy DIR       write every published module at the release version,
//	                                       from the working tree, as a GOPROXY=file://DIR proxy
//
// Exit status: 0 when it did what was asked, 1 when the modules break a rule (each broken rule is
// printed), 2 for a wrong command line.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/svcplatform/conventions/tools/internal/repo"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: release check | version vX.Y.Z | tags | proxy DIR`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	root, err := repo.FindRoot()
	if err != nil {
		fmt.Fprintln(stderr, "release:", err)
		return 1
	}
	r, err := repo.Load(root)
	if err != nil {
		fmt.Fprintln(stderr, "release:", err)
		return 1
	}
	switch cmd := args[0]; {
	case cmd == "check" && len(args) == 1:
		return check(r, stdout, stderr)
	case cmd == "version" && len(args) == 2:
		if err := repo.CheckVersion(args[1]); err != nil {
			fmt.Fprintln(stderr, "release:", err)
			return 2
		}
		written, err := r.SetVersion(args[1])
		for _, name := range written {
			fmt.Fprintln(stdout, "wrote", name)
		}
		if err != nil {
			fmt.Fprintln(stderr, "release:", err)
			return 1
		}
		if code := check(r, io.Discard, stderr); code != 0 {
			return code
		}
		fmt.Fprintln(stdout, "tags to create, on the commit that holds these go.mod files:")
		printTags(r, args[1], stdout)
		return 0
	case cmd == "tags" && len(args) == 1:
		v, err := r.Version()
		if err != nil {
			fmt.Fprintln(stderr, "release:", err)
			return 1
		}
		printTags(r, v, stdout)
		return 0
	case cmd == "proxy" && len(args) == 2:
		if code := check(r, io.Discard, stderr); code != 0 {
			return code
		}
		v, _ := r.Version()
		dir, err := filepath.Abs(args[1])
		if err == nil {
			err = r.WriteProxy(dir, v, time.Now())
		}
		if err != nil {
			fmt.Fprintln(stderr, "release:", err)
			return 1
		}
		for _, m := range r.Published() {
			fmt.Fprintf(stdout, "%s@%s\n", m.Path, v)
		}
		return 0
	}
	fmt.Fprintln(stderr, usage)
	return 2
}

func check(r *repo.Repo, stdout, stderr io.Writer) int {
	if errs := r.Check(); len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintln(stderr, "release:", err)
		}
		return 1
	}
	v, _ := r.Version()
	fmt.Fprintf(stdout, "release %s of %d published modules, go %s\n", v, len(r.Published()), r.GoVersion())
	return 0
}

func printTags(r *repo.Repo, version string, w io.Writer) {
	for _, m := range r.Published() {
		fmt.Fprintln(w, m.Tag(version))
	}
}
