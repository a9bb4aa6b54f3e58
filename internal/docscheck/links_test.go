// Package docscheck holds the repository's checks on itself: every relative link in a Markdown file
// resolves and nothing points outside the repository; every exported type documents its zero value;
// no constructor panics; no non-test file imports testify; and no nested module imports the root
// module's internal/.
package docscheck

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// repoRoot walks up from the test's directory to the directory holding go.work.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test's directory")
		}
		dir = parent
	}
}

// files lists the repository's files with one of the extensions, skipping .git and testdata.
func files(t *testing.T, root string, exts ...string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		for _, ext := range exts {
			if !d.IsDir() && strings.HasSuffix(path, ext) {
				out = append(out, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// markdownLink finds inline links and images: [text](target) and ![alt](target).
var markdownLink = regexp.MustCompile(`\]\(([^()\s]+)\)`)

// anchors returns the GitHub-style anchors of a Markdown file's headings.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		a := slug(strings.TrimLeft(line, "#"))
		if n := seen[a]; n > 0 {
			out[a+"-"+itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// slug is GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}

func TestMarkdownLinksResolve(t *testing.T) {
	root := repoRoot(t)
	checked := 0
	defer func() {
		if checked == 0 {
			t.Error("no relative link found: the check checked nothing")
		}
		t.Logf("%d relative links checked", checked)
	}()
	for _, md := range files(t, root, ".md") {
		data, err := os.ReadFile(md)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, md)
		for _, m := range markdownLink.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			path := md
			if file != "" {
				path = filepath.Join(filepath.Dir(md), filepath.FromSlash(file))
				if !strings.HasPrefix(path, root) {
					t.Errorf("%s: link %q leaves the repository", rel, target)
					continue
				}
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %q: no such file", rel, target)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchors(t, path)[anchor] {
				t.Errorf("%s: link %q: no heading with that anchor", rel, target)
			}
		}
	}
}

// The repository stands alone: no document or comment sends a reader to files beside it.
func TestNothingPointsOutsideTheRepository(t *testing.T) {
	root := repoRoot(t)
	for _, f := range files(t, root, ".md", ".go") {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "../"+"shared") {
			rel, _ := filepath.Rel(root, f)
			t.Errorf("%s mentions ../%s, which a user of the repository does not have", rel, "shared")
		}
	}
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		" D8 Media types of request bodies":   "d8-media-types-of-request-bodies",
		" 6. Events":                          "6-events",
		" The demo: `go run ./examples/demo`": "the-demo-go-run-examplesdemo",
		" PostgreSQL throughput (issue 14)":   "postgresql-throughput-issue-14",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}
