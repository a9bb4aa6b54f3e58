package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcplatform/conventions/tools/internal/repo"
)

// The README's first service is found and is a whole program.
func TestFirstServiceFromTheReadme(t *testing.T) {
	root, err := repo.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := firstService(readme)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"package main\n", "func main() {", "pgstore.Migrate", "idempotency.New", "PublishToOwner", "versioning.New"} {
		if !bytes.Contains(src, []byte(want)) {
			t.Errorf("the first service lacks %q", want)
		}
	}
	if !bytes.HasSuffix(src, []byte("}\n")) {
		t.Errorf("the first service is cut short:\n%s", src)
	}
}

func TestFirstServiceRefuses(t *testing.T) {
	for name, readme := range map[string]string{
		"no marker":        "# x\n```go\npackage main\n```\n",
		"no block after":   "<!-- first service: x -->\n\ntext\n",
		"another language": "<!-- first service: x -->\n```sh\ngo run .\n```\n",
	} {
		if _, err := firstService([]byte(readme)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestWithSearchPath(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u:p@127.0.0.1:5432/test?sslmode=disable": "postgres://u:p@127.0.0.1:5432/test?search_path=s1&sslmode=disable",
		"postgresql://127.0.0.1/test":                        "postgresql://127.0.0.1/test?search_path=s1",
		"host=127.0.0.1 dbname=test":                         "host=127.0.0.1 dbname=test search_path=s1",
	} {
		got, err := withSearchPath(dsn, "s1")
		if err != nil || got != want {
			t.Errorf("withSearchPath(%q) = %q, %v; want %q", dsn, got, err, want)
		}
	}
	_, err := withSearchPath("postgres://u:secret@%zz/x", "s1")
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("a DSN that does not parse: %v (must fail without echoing it)", err)
	}
}
