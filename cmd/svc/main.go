package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes. They are part of the command's interface: scripts branch on them.
const (
	exitOK          = 0 // success; listen: stopped by Ctrl-C or SIGTERM after the delivery in flight
	exitInvalid     = 1 // verification failed: a signature, a timestamp or a sequence (verify), an unauthentic range page (events)
	exitUsage       = 2 // usage: an unknown command or flag, a bad value, a missing credential or configuration
	exitRefused     = 3 // the server refused the request: a 4xx problem, shown with its detail and violations; or would, by what it said (refusedError)
	exitUnavailable = 4 // the server or the network failed: a 5xx, a timeout, a refused connection; retrying may help
	exitLost        = 5 // listen: going on would skip events: pruned after the cursor, or a cursor ahead of the stream
	exitInterrupted = 130
)

const exitCodesHelp = `Exit codes:
  0  success (listen: stopped by Ctrl-C or SIGTERM once the delivery in flight was answered)
  1  verification failed: a signature, a timestamp or a sequence (verify); a range page that is not
     authentic (events), or five in a row (listen: the wrong secret, most likely)
  2  usage: an unknown command or flag, a bad value, a missing credential or configuration
  3  the server refused the request: a 4xx problem, shown with its detail and located violations;
     or svc did not send it, the server's answer saying it would be refused (version-pin rollback)
  4  the server or the network failed: a 5xx, a timeout, a refused connection; retrying may help
  5  listen: going on would skip events silently: the events after the cursor were pruned (410),
     or the cursor is ahead of the stream's newest event (another server's, or planted)
130  interrupted a second time: stopped at once, the delivery in flight is forwarded again next time
`

// env is the part of the process environment svc reads; tests pass their own.
type env struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// uid is the user svc runs as (the effective user ID; -1 where there is none): its config file and
	// cursors must be theirs.
	uid int
	// interrupts delivers SIGINT and SIGTERM. listen stops after the delivery in flight at the first
	// and at once at the second; every other command stops at once.
	interrupts <-chan os.Signal
}

func main() {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	os.Exit(run(os.Args[1:], env{getenv: os.Getenv, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr,
		uid: os.Geteuid(), interrupts: sig}))
}

// command is one of svc's commands (or a group of subcommands, such as faults).
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e env, args []string) error
	sub     []command
	help    string // a group's: what its --help says beyond the list of its commands
}

var commands = []command{
	{name: "listen", summary: "follow an endpoint's events by range retrieval and forward each to a local URL, in order, once", run: runListen},
	{name: "trigger", summary: "trigger a test event in the sandbox (svc trigger order.created)", run: runTrigger},
	{name: "events", summary: "fetch, verify and print an endpoint's events by sequence range", run: runEvents, sub: []command{
		{name: "resend", summary: "push one retained event to its endpoint again (the same body and sequence)", run: runEventsResend},
		{name: "recover", summary: "push a retained range of events to their endpoint again, in order", run: runEventsRecover},
	}},
	{name: "verify", summary: "check a captured delivery's X-SVC-Signature against the secret", run: runVerify},
	{name: "endpoints", summary: "create, list, get, update, disable, enable and delete webhook endpoints, and roll their secrets", sub: []command{
		{name: "create", summary: "register a webhook endpoint and print its ID and signing secret", run: runEndpointsCreate},
		{name: "list", summary: "list the webhook endpoints of the key's licensee", run: runEndpointsList},
		{name: "get", summary: "show a webhook endpoint's settings and status", run: runEndpointsGet},
		{name: "update", summary: "change a webhook endpoint's URL, event types, description, metadata or headers", run: runEndpointsUpdate},
		{name: "disable", summary: "stop a webhook endpoint's deliveries (its events are still kept)", run: runEndpointsDisable},
		{name: "enable", summary: "resume a disabled webhook endpoint's deliveries", run: runEndpointsEnable},
		{name: "delete", summary: "delete a webhook endpoint (its events stay readable by range until retention)", run: runEndpointsDelete},
		{name: "roll-secret", summary: "give a webhook endpoint a new signing secret; the old one signs too until it expires", run: runEndpointsRollSecret},
		{name: "stats", summary: "show a webhook endpoint's delivery health: attempts, success rate, latency, backlog", run: runEndpointsStats},
	}},
	{name: "keys", summary: "list, create, get, revoke and roll the API keys of the key's licensee", sub: []command{
		{name: "list", summary: "list the API keys that still work, without their secrets", run: runKeysList},
		{name: "create", summary: "create an API key, restricted to --permission or like the key that asks; its secret shown once", run: runKeysCreate},
		{name: "get", summary: "show an API key's permissions, end and last use", run: runKeysGet},
		{name: "revoke", summary: "end an API key now", run: runKeysRevoke},
		{name: "roll", summary: "replace an API key with a new one of the same permissions; the old one works until --expires-in", run: runKeysRoll},
	}},
	{name: "requests", summary: "list and show the requests the server recorded for the key's licensee", help: requestsHelp, sub: []command{
		{name: "list", summary: "list recorded requests, newest first, by status, code, key, route and time", run: runRequestsList},
		{name: "get", summary: "show what became of one request, by its ID (X-Request-Id, a problem's request_id)", run: runRequestsGet},
	}},
	{name: "version-pin", summary: "show the API version the key's licensee is pinned to, upgrade it, or roll an upgrade back", sub: []command{
		{name: "show", summary: "show the pinned version, the newest and supported ones, and until when a rollback is possible", run: runVersionPinShow},
		{name: "upgrade", summary: "move the pin forward to a newer version (svc changelog says what changes)", run: runVersionPinUpgrade},
		{name: "rollback", summary: "move the pin back to the version of its last upgrade, once, within the rollback window", run: runVersionPinRollback},
	}},
	{name: "portal", summary: "print a one-time link to the webhook portal, the web page of the key's endpoints and deliveries", run: runPortal},
	{name: "changelog", summary: "list the API's versions, their dates and the changes each introduced", run: runChangelog},
	{name: "event-types", summary: "list the event types the server declares (what --events may name)", run: runEventTypes},
	{name: "orders", summary: "create orders on the reference server", sub: []command{
		{name: "create", summary: "create an order, with an Idempotency-Key it prints and retries on", run: runOrdersCreate},
	}},
	{name: "faults", summary: "inject webhook faults on a sandbox endpoint, or clear them", sub: []command{
		{name: "set", summary: "set an endpoint's fault rates (drop, duplicate, reorder, delay, bad signature)", run: runFaultsSet},
		{name: "clear", summary: "clear an endpoint's faults", run: runFaultsClear},
	}},
	{name: "credentials", summary: "issue sandbox credentials (admin)", sub: []command{
		{name: "new", summary: "start a new evaluation: a sandbox API key for a licensee of its own", run: runCredentialsNew},
	}},
	{name: "version", summary: "print svc's version", run: runVersion},
}

// run runs svc with args and returns the exit code. Everything it prints passes through terminalSafe.
func run(args []string, e env) int {
	e.stdout, e.stderr = newTerminalSafe(e.stdout), newTerminalSafe(e.stderr)
	if len(args) == 0 {
		printHelp(e.stderr)
		return exitUsage
	}
	if isHelp(args[0]) || args[0] == "help" {
		if len(args) > 1 && args[0] == "help" {
			return run(append(args[1:], "--help"), e)
		}
		printHelp(e.stdout)
		return exitOK
	}
	cmd, rest, path, err := lookup(commands, args, "svc")
	if err != nil {
		fmt.Fprintf(e.stderr, "svc: %v\nRun 'svc help' for the commands.\n", err)
		return exitUsage
	}
	if cmd.sub != nil && cmd.run == nil { // a group: "svc faults", "svc faults --help"
		w, code := e.stderr, exitUsage
		if len(rest) > 0 && isHelp(rest[0]) {
			w, code = e.stdout, exitOK
		} else if len(rest) > 0 {
			fmt.Fprintf(e.stderr, "svc: unknown command %q\n", path+" "+rest[0])
		}
		printGroupHelp(w, path, cmd)
		return code
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if cmd.name != "listen" { // listen decides for itself what an interrupt means
		go func() {
			select {
			case <-e.interrupts:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return exitCode(cmd.run(ctx, e, rest), e.stderr, ctx)
}

// lookup finds the command args name, descending into groups.
func lookup(cmds []command, args []string, path string) (command, []string, string, error) {
	for _, c := range cmds {
		if c.name != args[0] {
			continue
		}
		path += " " + c.name
		if c.sub != nil && len(args) > 1 && !isHelp(args[1]) && args[1][0] != '-' {
			sc, rest, p, err := lookup(c.sub, args[1:], path)
			if err != nil {
				return command{}, nil, "", err
			}
			return sc, rest, p, nil
		}
		return c, args[1:], path, nil
	}
	return command{}, nil, "", fmt.Errorf("unknown command %q", path+" "+args[0])
}

func isHelp(a string) bool { return a == "-h" || a == "--help" || a == "-help" }

func printHelp(w io.Writer) {
	fmt.Fprint(w, `svc is the command-line tool for APIs built with github.com/svcplatform/conventions.

Usage: svc <command> [flags]

Commands:
`)
	for _, c := range commands {
		if c.run != nil { // a command, which may have subcommands too ("events", "events resend")
			fmt.Fprintf(w, "  %-22s %s\n", c.name, c.summary)
		}
		for _, s := range c.sub {
			fmt.Fprintf(w, "  %-22s %s\n", c.name+" "+s.name, s.summary)
		}
	}
	fmt.Fprint(w, "\n'svc <command> --help' describes a command and its flags.\n\n"+configHelp+"\n"+exitCodesHelp)
}

func printGroupHelp(w io.Writer, path string, c command) {
	fmt.Fprintf(w, "Usage: %s <command> [flags]\n\n%s.\n\nCommands:\n", path, upperFirst(c.summary))
	for _, s := range c.sub {
		fmt.Fprintf(w, "  %-12s %s\n", s.name, s.summary)
	}
	if c.help != "" {
		fmt.Fprintf(w, "\n%s\n", c.help)
	}
	fmt.Fprintf(w, "\n'%s <command> --help' describes a command and its flags.\n", path)
}

func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// usageError is a mistake in the command line or the configuration: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// invalidError is a verification that failed: exit code 1. Its message says why.
type invalidError struct{ msg string }

func (e *invalidError) Error() string { return e.msg }

// exitCode prints err (when it has something to say) and maps it to the documented exit code.
func exitCode(err error, stderr io.Writer, ctx context.Context) int {
	if err == nil {
		return exitOK
	}
	var (
		ue *usageError
		ie *invalidError
		re *refusedError
		pe *problemError
		le *lostError
		ae *aheadError
	)
	switch {
	case errors.Is(err, errHelpShown):
		return exitOK
	case errors.Is(err, errAbandoned):
		fmt.Fprintf(stderr, "svc: %v\n", err)
		return exitInterrupted
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "svc: %s\n", ue.msg)
		return exitUsage
	case errors.As(err, &ie):
		fmt.Fprintf(stderr, "svc: %s\n", ie.msg)
		return exitInvalid
	case errors.As(err, &re):
		fmt.Fprintf(stderr, "svc: %s\n", re.msg)
		return exitRefused
	case errors.As(err, &le), errors.As(err, &ae):
		fmt.Fprintf(stderr, "svc: %v\n", err)
		return exitLost
	case errors.As(err, &pe):
		pe.print(stderr)
		if pe.retryable() {
			return exitUnavailable
		}
		return exitRefused
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "svc: interrupted")
		return exitInterrupted
	default:
		fmt.Fprintf(stderr, "svc: %v\n", err)
		return exitUnavailable
	}
}
