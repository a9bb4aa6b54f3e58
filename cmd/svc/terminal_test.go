package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook/webhooktest"
)

// hostile is a JSON string's content as a hostile server writes it: CSI and OSC as C1 controls
// (U+009B, U+009D, escaped and raw), a bidi override (U+202E, escaped and raw), ESC, DEL, a line
// separator, and the raw C1 bytes 0x9B and 0x9D that are not UTF-8 at all.
const hostile = `A\u009b31mB\u009d0;owned\u0007C\u202eD\u001b[2JE` + "\u009b\u009d\u202e\u2028\u2066" + `\u007f` + "\x9b\x9d" + `F`

// requireTerminalSafe fails when s holds a byte sequence a terminal could act on: anything but
// valid UTF-8 of graphic runes, newlines and tabs.
func requireTerminalSafe(t *testing.T, what, s string) {
	t.Helper()
	require.True(t, utf8.ValidString(s), "%s is not valid UTF-8: %q", what, s)
	for i, r := range s {
		if r != '\n' && r != '\t' && !unicode.IsGraphic(r) {
			t.Fatalf("%s holds %U at byte %d: %q", what, r, i, s)
		}
	}
}

// hostileAPI answers every route svc calls with the hostile string in every member svc prints;
// problem makes each answer a 422 problem (and plain makes it a non-problem error page) instead.
func hostileAPI(t *testing.T, mode string) *httptest.Server {
	h := `"` + hostile + `"`
	bodies := map[string]string{
		"POST /v1/sandbox/events":                          `{"data":[{"endpoint":` + h + `,"event":{"id":` + h + `,"type":` + h + `,"sequence":7}}]}`,
		"POST /v1/webhook_endpoints":                       `{"id":` + h + `,"url":` + h + `,"secret":` + h + `,"api_version":` + h + `}`,
		"GET /v1/webhook_endpoints":                        `{"object":"list","data":[{"id":` + h + `,"url":` + h + `,"api_version":` + h + `}]}`,
		"POST /v1/orders":                                  `{"id":` + h + `,"side":` + h + `,"account":` + h + `,"status":` + h + `,"x":{"y":` + h + `}}`,
		"POST /v1/sandbox/webhook_endpoints/we_h/faults":   `{"endpoint":` + h + `,"drop":0.5}`,
		"DELETE /v1/sandbox/webhook_endpoints/we_h/faults": `{"endpoint":` + h + `}`,
		"POST /v1/sandbox/credentials":                     `{"api_key":` + h + `,"expires_at":1767225600,"key_id":` + h + `,"licensee":` + h + `,"base_url":` + h + `}`,
		"GET /v1/webhook_endpoints/we_h/events": `{"object":"list","data":[{"object":"event","id":` + h + `,"endpoint":"we_h","sequence":1,"type":` + h +
			`,"created":1767225600,"api_version":"v1","data":{"k":` + h + `,` + h + `:[` + h + `]}}],"has_more":false}`,
	}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode {
		case "problem":
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("X-Request-Id", hostile)
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"type":"about:blank","title":` + h + `,"status":422,"detail":` + h + `,"code":` + h +
				`,"request_id":` + h + `,"errors":[{"location":"body","pointer":` + h + `,"code":` + h + `,"detail":` + h + `}]}`))
			return
		case "plain":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadRequest) // a 4xx: svc does not retry it
			_, _ = w.Write([]byte("<h1>A\x1b]0;owned\x07\u009b31m\u202e\x9b</h1>"))
			return
		}
		key := r.Method + " " + r.URL.Path
		if r.URL.Path == "/v1/webhook_endpoints/we_h/events" && r.URL.Query().Get("from") != "1" {
			key += " past"
		}
		body, ok := bodies[key]
		if !ok {
			body = `{"object":"list","data":[],"has_more":false}`
		}
		if strings.HasSuffix(r.URL.Path, "/events") {
			w.Header().Set("X-SVC-Signature", webhooktest.Header([]byte(body), time.Now(), testSecret))
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
}

// Whatever a server puts in its answers, no control character, C1 control (raw or encoded), bidi
// override or other format character reaches the terminal, in any command, with or without --json;
// --json stays JSON and keeps every value exactly (the runes escaped as \u, not replaced).
func TestHostileAnswersNeverReachTheTerminal(t *testing.T) {
	fastTiming(t)
	commands := [][]string{
		{"trigger", "order.created"},
		{"events", "--from", "1"},
		{"endpoints", "create", "--url", "https://example.com/h"},
		{"endpoints", "list"},
		{"orders", "create", "--account", "acc_1"},
		{"faults", "set", "--drop", "0.5"},
		{"faults", "clear"},
		{"credentials", "new"},
	}
	for _, mode := range []string{"ok", "problem", "plain"} {
		api := hostileAPI(t, mode)
		defer api.Close()
		vars := map[string]string{envAPIKey: testKey, envSecret: testSecret, envBaseURL: api.URL, envEndpoint: "we_h",
			envAdminToken: "admin_token_x"}
		for _, args := range commands {
			for _, out := range []string{"text", "json", "export"} {
				args := args
				switch {
				case out == "json":
					args = append(args[:len(args):len(args)], "--json")
				case out == "export" && (args[0] == "credentials" || args[0] == "endpoints" && args[1] == "create"):
					args = append(args[:len(args):len(args)], "--export")
				case out == "export":
					continue
				}
				t.Run(mode+"/"+strings.Join(args, " "), func(t *testing.T) {
					r := runSvc(t, vars, "", args...)
					requireTerminalSafe(t, "stdout", r.stdout)
					requireTerminalSafe(t, "stderr", r.stderr)
					if mode != "ok" {
						require.NotEqual(t, exitOK, r.code)
						if mode == "problem" || args[0] != "events" { // a range page that is no problem is not quoted
							require.Contains(t, r.stderr, "A\uFFFD", "the hostile text is shown, made safe")
						}
						return
					}
					require.Equal(t, exitOK, r.code, r.stderr)
					if out != "json" {
						require.Contains(t, r.stdout, "A\uFFFD", "the hostile text is shown, made safe")
						return
					}
					lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
					require.Len(t, lines, 1, "one JSON value per line")
					var got map[string]any
					require.NoError(t, json.Unmarshal([]byte(lines[0]), &got), "--json prints JSON: %s", lines[0])
					require.Contains(t, lines[0], `A\u009b31mB\u009d0;owned\u0007C\u202eD\u001b[2JE\u009b\u009d\u202e\u2028\u2066\u007f`,
						"every value is kept exactly, its unsafe runes escaped")
					want := hostileValue(t)
					require.True(t, containsValue(got, want), "the hostile value decodes back exactly: %v", got)
				})
			}
		}
	}
}

// hostileValue is the hostile string as any JSON decoder reads it (the raw non-UTF-8 bytes as U+FFFD).
func hostileValue(t *testing.T) string {
	var s string
	require.NoError(t, json.Unmarshal([]byte(`"`+hostile+`"`), &s))
	return s
}

func containsValue(v any, want string) bool {
	switch v := v.(type) {
	case string:
		return v == want
	case map[string]any:
		for k, x := range v {
			if k == want || containsValue(x, want) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if containsValue(x, want) {
				return true
			}
		}
	}
	return false
}

// listen prints what the server sent (type, ID) on every attempt line, and its fetch errors.
func TestListenHostileAnswersNeverReachTheTerminal(t *testing.T) {
	fastTiming(t)
	api := hostileAPI(t, "ok")
	defer api.Close()
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer local.Close()
	vars := map[string]string{envAPIKey: testKey, envSecret: testSecret, envBaseURL: api.URL, envEndpoint: "we_h"}
	for _, jsonOut := range []bool{false, true} {
		args := []string{"--forward-to", local.URL, "--cursor", filepath.Join(t.TempDir(), "c.json"), "--poll", "5ms"}
		if jsonOut {
			args = append(args, "--json")
		}
		l := startListen(t, vars, args...)
		waitFor(t, "the delivery", func() bool { return strings.Contains(l.stdout.String(), "\n") })
		l.interrupts <- os.Interrupt
		require.Equal(t, exitOK, l.wait(t), l.stderr.String())
		requireTerminalSafe(t, "stdout", l.stdout.String())
		requireTerminalSafe(t, "stderr", l.stderr.String())
		if jsonOut {
			var a attemptLine
			line, _, _ := strings.Cut(l.stdout.String(), "\n")
			require.NoError(t, json.Unmarshal([]byte(line), &a))
			require.Equal(t, hostileValue(t), a.Type, "--json keeps the value exactly")
		} else {
			require.Contains(t, l.stdout.String(), "A\uFFFD")
		}
	}
	plain := hostileAPI(t, "plain")
	defer plain.Close()
	l := startListen(t, map[string]string{envAPIKey: testKey, envSecret: testSecret, envBaseURL: plain.URL, envEndpoint: "we_h"},
		"--forward-to", local.URL, "--cursor", filepath.Join(t.TempDir(), "c.json"), "--poll", "5ms")
	waitFor(t, "a failed fetch", func() bool { return strings.Contains(l.stderr.String(), "retrying") })
	l.interrupts <- os.Interrupt
	l.wait(t)
	requireTerminalSafe(t, "stderr", l.stderr.String())
}

// The writer every byte of svc's output passes through.
func TestTerminalSafe(t *testing.T) {
	var b bytes.Buffer
	in := []byte("ok\tline\n\x1b]0;owned\x07title \x1b[2J\x7f \u009b31m \u202e \x9b\x9d \r\u00e9\u4e16")
	n, err := terminalSafe{&b}.Write(in)
	require.NoError(t, err)
	require.Equal(t, len(in), n)
	require.Equal(t, "ok\tline\n\uFFFD]0;owned\uFFFDtitle \uFFFD[2J\uFFFD \uFFFD31m \uFFFD \uFFFD\uFFFD \uFFFD\u00e9\u4e16", b.String())
	require.Equal(t, byte(0x1b), in[8], "the caller's bytes are not changed")
	require.Equal(t, "a\uFFFDb\uFFFDc\uFFFDd", clean("a\u202Eb\x1bc\nd"))

	for _, tc := range []struct{ in, want string }{
		{`{"a":"x"}`, `{"a":"x"}`},
		{" {\n \"a\" : [ 1 , \"\u009b\u202e\u00e9\" ] }\n", `{"a":[1,"\u009b\u202e` + "\u00e9" + `"]}`},
		{`{"\u009b":"\u001b"}`, `{"\u009b":"\u001b"}`},
		{"\"\x9b\u007f\U000E0001\"", `"\ufffd\u007f\udb40\udc01"`},
		{`"\"\\` + "\u2028" + `"`, `"\"\\\u2028"`},
	} {
		got, err := jsonSafe([]byte(tc.in))
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, string(got))
		requireTerminalSafe(t, "jsonSafe", string(got))
	}
	_, err = jsonSafe([]byte("{\x1b"))
	require.Error(t, err)
}
