//go:build unix

package examples

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The checker TestReadme relies on, checked on small READMEs of its own: what it refuses to parse,
// what it counts as the same output, and that a drifted command fails with its line.

func writeReadme(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "README.md")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

func TestReadmeParserRefuses(t *testing.T) {
	for _, tc := range []struct{ name, readme, err string }{
		{"a fence without a language", "x\n```\nls\n```\n", "README.md:2: a fence without a language"},
		{"a shell fence that is not sh", "```bash\nls\n```\n", "README.md:1: a ```bash block: write ```sh"},
		{"a marker before prose", "<!-- not run: why -->\ntext\n```sh\nls\n```\n", "README.md:1: a <!-- not run --> marker not followed by a ```sh block"},
		{"a marker before output", "<!-- not run: why -->\n```text\nls\n```\n", "README.md:1: a <!-- not run --> marker before a ```text block"},
		{"a marker at the end", "```sh\nls\n```\n<!-- background: why -->\n", "README.md:4: a <!-- background --> marker not followed by a ```sh block"},
		{"a marker without a reason", "<!-- not run: -->\n```sh\nls\n```\n", "README.md:1: <!-- not run: --> says why"},
		{"a fence never closed", "```sh\nls\n", "README.md:1: the fence is never closed"},
		{"output before a command", "```sh\n#   out\nls\n```\n", "README.md:2: output shown before any command"},
		{"JSON never closed", "```sh\necho\n#   {\"a\":[1,\n```\n", "README.md:3: the JSON shown is never closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseReadme(writeReadme(t, tc.readme))
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func TestReadmeParserSteps(t *testing.T) {
	blocks, err := parseReadme(writeReadme(t, strings.Join([]string{
		"# Title",                   // 1
		"```text",                   // 2
		"not a command",             // 3
		"```",                       // 4
		"<!-- not run: needs X -->", // 5
		"",                          // 6
		"```sh",                     // 7
		"x --start",                 // 8
		"```",                       // 9
		"```sh",                     // 10
		"# prose",                   // 11
		"A=1 \\",                    // 12
		"  B=2",                     // 13
		"#   shown   (a note)",      // 14
		"#   {\"a\":\"{\",",         // 15
		"#     \"b\":[1]}",          // 16
		"",                          // 17
		"echo two",                  // 18
		"```",                       // 19
	}, "\n")))
	require.NoError(t, err)
	require.Len(t, blocks, 2)
	require.Equal(t, readmeBlock{at: "README.md:7", marker: markerNotRun, reason: "needs X", text: "x --start",
		steps: []readmeStep{{at: "README.md:8", command: "x --start\n"}}}, blocks[0])
	require.Equal(t, []readmeStep{
		{at: "README.md:12", command: "A=1 \\\n  B=2\n", expected: []expectedLine{
			{at: "README.md:14", text: "shown"}, {at: "README.md:15", text: `{"a":"{","b":[1]}`}}},
		{at: "README.md:18", command: "echo two\n"},
	}, blocks[1].steps)
}

func TestReadmeMatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shown []string
		out   []string
		ok    bool
	}{
		{"IDs, times and keys by their shape",
			[]string{`{"id":"ord_3ez7diiaiorpqszagd2xfxcvtq","created":1795577746,"key":"sk_sandbox_xmfreslfxuzsavbln6rvoboerdhq2vruajsqfbqx"}`},
			[]string{`{"id":"ord_aaaaaaaaaaaaaaaaaaaaaaaaaa","created":1800000000,"key":"sk_sandbox_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}`}, true},
		{"an ID of another kind differs", []string{`"id":"ord_3ez7diiaiorpqszagd2xfxcvtq"`}, []string{`"id":"we_3ez7diiaiorpqszagd2xfxcvtq"`}, false},
		{"a member's value differs", []string{`{"side":"buy"}`}, []string{`{"side":"sell"}`}, false},
		{"… stands for anything", []string{`{"status":404,"code":"route_not_found",…}`}, []string{`{"status":404,"code":"route_not_found","x":1}`}, true},
		{"… does not excuse a missing member", []string{`{"status":404,…}`}, []string{`{"status":400,"code":"x"}`}, false},
		{"lines in order, others skipped", []string{"HTTP/1.1 201 Created", "Location: /v1/orders/ord_…"},
			[]string{"HTTP/1.1 201 Created\r", "Content-Type: application/json", "Location: /v1/orders/ord_x"}, true},
		{"lines out of order", []string{"b", "a"}, []string{"a", "b"}, false},
		{"an ephemeral port by its shape, a fixed one exactly", []string{"http://127.0.0.1:39247 http://127.0.0.1:9090"},
			[]string{"http://127.0.0.1:41234 http://127.0.0.1:9090"}, true},
		{"a fixed port differs", []string{"http://127.0.0.1:9090"}, []string{"http://127.0.0.1:9091"}, false},
		{"dates and signatures", []string{"Sunset: Sun, 22 Aug 2027 00:00:00 GMT t=1795577752,v1=e1ed3e65f190b94f1954f8921075265dbcab11ec5a376ba9892b961ff115ed1f"},
			[]string{"Sunset: Mon, 23 Aug 2027 00:00:00 GMT t=1795577999,v1=0000000000000000000000000000000000000000000000000000000000000000"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var shown []expectedLine
			for _, s := range tc.shown {
				shown = append(shown, expectedLine{at: "README.md:1", text: s})
			}
			err := match(shown, tc.out)
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
		})
	}
}

// TestReadmeRunnerCatchesDrift runs small READMEs with the runner TestReadme uses: each way a README
// can be wrong fails with the line to fix.
func TestReadmeRunnerCatchesDrift(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("bash is not installed, and under CI=true nothing may skip")
		}
		t.Skip("bash is not installed")
	}
	// The background block stands in for a server: it prints, then runs until interrupted.
	const server = "<!-- background: a stand-in server -->\n```sh\necho 'listening on http://127.0.0.1:40000'; exec sleep 600\n#   listening on http://127.0.0.1:…\n```\n"
	for _, tc := range []struct{ name, readme, err string }{
		{"as shown", server + "<!-- not run: needs Docker -->\n```sh\ndocker compose up\n```\n```sh\nX=hello\necho \"$X world\"\n#   hello world\n```\n", ""},
		{"another output", server + "```sh\necho hello\n#   goodbye\n```\n", "README.md:7: the output differs from what the README shows"},
		{"a failing command", server + "```sh\necho fine\nfalse\n```\n", "README.md:7: the command failed (exit status 1)"},
		{"a variable never set", "```sh\necho \"$NEVER_SET\"\n```\n", "README.md:2: bash exited during the command"},
		{"a background block that never prints what is shown", "<!-- background: x -->\n```sh\necho other\n#   listening on …\n```\n```sh\necho\n```\n",
			"README.md:2: the block ended before it printed what the README shows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blocks, err := parseReadme(writeReadme(t, tc.readme))
			require.NoError(t, err)
			summary, err := runReadme(blocks, t.TempDir(), readmeEnv(t.TempDir()))
			if tc.err == "" {
				require.NoError(t, err)
				require.Equal(t, "ran 2 sh blocks: 1 in one shell, checked in 1 steps, and 1 in the background; 1 not run: README.md:7 (needs Docker)", summary)
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
}
