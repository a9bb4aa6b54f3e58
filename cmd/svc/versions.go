package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// The API's versions as a licensee sees them: its pin (versioning.Router.PinHandler on the server),
// moved forward by an upgrade and back, once, by a rollback; and the changelog of every version
// (versioning.Router.ChangelogHandler).

// pinJSON is the licensee's version pin as the server sends it.
type pinJSON struct {
	Version       string   `json:"version"`
	PinnedAt      int64    `json:"pinned_at"`
	Newest        string   `json:"newest_version"`
	Supported     []string `json:"supported_versions"`
	Previous      string   `json:"previous_version"` // absent when the pin never moved
	RollbackUntil *int64   `json:"rollback_until"`   // present only while a rollback is possible
}

func runVersionPinShow(ctx context.Context, e env, args []string) error {
	var (
		cm      common
		jsonOut bool
	)
	f := newFlags(e, "svc version-pin show", "[flags]", `
Show the API version the key's licensee is pinned to — every request of its keys is answered in
that version's shape, and other versions are refused — with the newest version, the versions the
server supports, and, after an upgrade, the version it came from and until when 'svc version-pin
rollback' can go back to it. 'svc changelog' says what each version changed.`)
	cm.register(f.FlagSet)
	f.BoolVar(&jsonOut, "json", false, "print the server's answer as JSON")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	cfg, c, err := apiClient(e, cm)
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodGet, "/version_pin", nil, "")
	if err != nil {
		return err
	}
	return printPin(e.stdout, resp, jsonOut, "", cfg)
}

func runVersionPinUpgrade(ctx context.Context, e env, args []string) error {
	var (
		cm common
		m  mutation
	)
	f := newFlags(e, "svc version-pin upgrade", "VERSION [flags]", `
Move the key's licensee's pin forward to VERSION: from the server's answer on, every request of its
keys, and every webhook delivery, is in that version's shape. Read 'svc changelog --version VERSION'
first: it lists what changes. An upgrade can be undone once, within the server's rollback window
('svc version-pin rollback'; the window is 72 hours by default); a pin never moves to an older
version otherwise. svc's own requests name the version too: set SVC_API_VERSION to the new one
afterwards (svc says so).

  svc version-pin upgrade v2`)
	cm.register(f.FlagSet)
	m.register(f, "")
	if err := f.parse(args, 1); err != nil {
		return err
	}
	to := f.arg(0)
	switch {
	case to == "":
		return usagef("svc version-pin upgrade: the version is required, such as v2 ('svc version-pin show' lists the supported ones)")
	case !validVersion(to):
		return usagef("svc version-pin upgrade: %q is not a version: they look like v1, v2, …", to)
	}
	cfg, c, err := apiClient(e, cm)
	if err != nil {
		return err
	}
	resp, err := m.send(ctx, e, c, http.MethodPost, "/version_pin", map[string]string{"version": to})
	if err != nil {
		return err
	}
	return printPin(e.stdout, resp, m.jsonOut, " now"+replayNote(resp), cfg)
}

func runVersionPinRollback(ctx context.Context, e env, args []string) error {
	var (
		cm common
		m  mutation
	)
	f := newFlags(e, "svc version-pin rollback", "[flags]", `
Move the key's licensee's pin back to the version its last upgrade came from: the way out of an
upgrade that broke an integration. It is possible once, within the server's rollback window after
the upgrade, while that version is still served; 'svc version-pin show' says until when. svc reads
the pin first and, when no rollback is possible, says why without sending anything: the pin never
moved, the window has closed, or the last move was not an upgrade (a rollback is not rolled back:
upgrade again instead). With --idempotency-key, the key of a rollback whose answer was lost, svc
sends that rollback again as it was, and the server replays its answer.`)
	cm.register(f.FlagSet)
	m.register(f, "")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	if err := m.checkKey(); err != nil {
		return err
	}
	cfg, c, err := apiClient(e, cm)
	if err != nil {
		return err
	}
	again := m.key != "" // the key of an earlier attempt: its request is sent again, unchanged
	resp, err := c.do(ctx, http.MethodGet, "/version_pin", nil, "")
	if err != nil {
		// The pin has left the version svc names: the earlier rollback was done, most likely. The same
		// request — on the same path, which names that version — replays its answer; had the key
		// done nothing, the router refuses it as it refused the read.
		if to, ok := pinnedElsewhere(err); ok && again && olderVersion(to, cfg.APIVersion) {
			return rollback(ctx, e, c, &m, cfg, cfg.APIVersion, to)
		}
		return err
	}
	var pin pinJSON
	if err := resp.decode(&pin); err != nil {
		return err
	}
	since := unixTime(&pin.PinnedAt)
	switch {
	case pin.Previous == "":
		return refusedf("no rollback: the pin has never moved: the key's licensee has been pinned to %s since %s", clean(pin.Version), since)
	case !olderVersion(pin.Previous, pin.Version) && again && validVersion(pin.Previous):
		// The last move went back, perhaps by the rollback this key sent from the newer version:
		// sent again as it was, on that version's path, it replays.
		return rollback(ctx, e, c, &m, cfg, pin.Previous, pin.Version)
	case !olderVersion(pin.Previous, pin.Version):
		return refusedf("no rollback: the last move was not an upgrade: the pin went back from %s to %s at %s, and a rollback is not rolled back: 'svc version-pin upgrade %s' goes forward again",
			clean(pin.Previous), clean(pin.Version), since, clean(pin.Previous))
	case pin.RollbackUntil == nil && !slices.Contains(pin.Supported, pin.Previous):
		return refusedf("no rollback: %s is no longer served (the server supports %s): the upgrade from %s to %s at %s is final",
			clean(pin.Previous), clean(strings.Join(pin.Supported, ", ")), clean(pin.Previous), clean(pin.Version), since)
	case pin.RollbackUntil == nil:
		return refusedf("no rollback: the window has closed: the upgrade from %s to %s at %s is final ('svc version-pin show' says until when a rollback is possible after an upgrade)",
			clean(pin.Previous), clean(pin.Version), since)
	}
	return rollback(ctx, e, c, &m, cfg, pin.Version, pin.Previous)
}

// rollback asks, on version from's path, for the pin to move to the version to, and prints the pin.
func rollback(ctx context.Context, e env, c *client, m *mutation, cfg *config, from, to string) error {
	at := *c
	at.version = from
	resp, err := m.send(ctx, e, &at, http.MethodPost, "/version_pin", map[string]string{"version": to})
	if err != nil {
		return err
	}
	return printPin(e.stdout, resp, m.jsonOut, " now: rolled back from "+from+replayNote(resp), cfg)
}

// pinnedElsewhere is the version a 403 version_not_enabled says the licensee is pinned to.
func pinnedElsewhere(err error) (string, bool) {
	var pe *problemError
	if !errors.As(err, &pe) || pe.problem == nil || pe.problem.Code != "version_not_enabled" {
		return "", false
	}
	v, _ := pe.problem.Extensions["pinned_version"].(string)
	return v, validVersion(v)
}

// refusedError is a request svc knows the server would refuse, from what the server said: exit code
// 3, as for the server's own refusal. Its message says why.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

func refusedf(format string, args ...any) error { return &refusedError{fmt.Sprintf(format, args...)} }

// olderVersion reports whether a and b are versions and a is the older.
func olderVersion(a, b string) bool {
	return validVersion(a) && validVersion(b) && (len(a) < len(b) || len(a) == len(b) && a < b)
}

// printPin prints the pin answered: "version pin v2" and what, then its details, and what svc's
// own SVC_API_VERSION must become when it no longer matches.
func printPin(w io.Writer, resp *response, jsonOut bool, what string, cfg *config) error {
	if jsonOut {
		return printJSON(w, resp.body)
	}
	var p pinJSON
	if err := resp.decode(&p); err != nil {
		return err
	}
	fmt.Fprintf(w, "the key's licensee is pinned to %s%s\n", clean(p.Version), what)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  pinned at\t%s\n", unixTime(&p.PinnedAt))
	newest := clean(p.Newest)
	if p.Newest != "" && p.Newest != p.Version && olderVersion(p.Version, p.Newest) {
		newest += " (what changes: 'svc changelog'; upgrade: 'svc version-pin upgrade " + clean(p.Newest) + "')"
	}
	fmt.Fprintf(tw, "  newest version\t%s\n  supported versions\t%s\n", newest, clean(strings.Join(p.Supported, ", ")))
	switch {
	case p.Previous == "":
		fmt.Fprintf(tw, "  previous version\tnone: the pin has never moved\n")
	case p.RollbackUntil != nil:
		fmt.Fprintf(tw, "  previous version\t%s: a rollback is possible, once, until %s ('svc version-pin rollback')\n", clean(p.Previous), unixTime(p.RollbackUntil))
	case olderVersion(p.Previous, p.Version):
		fmt.Fprintf(tw, "  previous version\t%s: the upgrade is final\n", clean(p.Previous))
	default:
		fmt.Fprintf(tw, "  previous version\t%s: the last move was a rollback\n", clean(p.Previous))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if cfg.APIVersion != p.Version && validVersion(p.Version) {
		fmt.Fprintf(w, "svc's requests name %s: set %s=%s (or pass --api-version %s) for the next ones\n", cfg.APIVersion, envAPIVersion, p.Version, p.Version)
	}
	return nil
}

// ---- changelog

// changelogJSON is one version of the changelog as the server sends it; dates are absent when not set.
type changelogJSON struct {
	Version    string `json:"version"`
	Released   int64  `json:"released"`
	Deprecated int64  `json:"deprecated"`
	Sunset     int64  `json:"sunset"`
	Changes    []struct {
		Name        string `json:"name"`
		Resource    string `json:"resource"`
		Description string `json:"description"`
	} `json:"changes"`
}

func runChangelog(ctx context.Context, e env, args []string) error {
	var (
		cm      common
		only    string
		jsonOut bool
	)
	f := newFlags(e, "svc changelog", "[--version V] [flags]", `
Print the API's versions, newest first, each with when it was released, deprecated and sunset
(from then on it answers 410), and the changes it introduced, read from the server's own
definitions of them: what an upgrade to it changes. 'svc version-pin show' says which version the
key's licensee is on.`)
	cm.register(f.FlagSet)
	f.StringVar(&only, "version", "", "only this version, such as v2")
	f.BoolVar(&jsonOut, "json", false, "print the server's answer as JSON (with --version, that version's entry)")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	if only != "" && !validVersion(only) {
		return usagef("svc changelog: --version %q is not a version: they look like v1, v2, …", only)
	}
	_, c, err := apiClient(e, cm)
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodGet, "/changelog", nil, "")
	if err != nil {
		return err
	}
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := resp.decode(&list); err != nil {
		return err
	}
	versions := make([]changelogJSON, len(list.Data))
	for i, raw := range list.Data {
		if err := json.Unmarshal(raw, &versions[i]); err != nil {
			return fmt.Errorf("the server's answer is not the expected JSON: %w", err)
		}
	}
	if only != "" {
		i := -1
		names := make([]string, len(versions))
		for j, v := range versions {
			names[j] = clean(v.Version)
			if v.Version == only {
				i = j
			}
		}
		if i < 0 {
			return usagef("svc changelog: the server has no version %s: it has %s", only, orNone(strings.Join(names, ", ")))
		}
		if jsonOut {
			return printJSON(e.stdout, list.Data[i])
		}
		printChangelog(e.stdout, versions[i:i+1], i == len(versions)-1)
		return nil
	}
	if jsonOut {
		return printJSON(e.stdout, resp.body)
	}
	if len(versions) == 0 {
		fmt.Fprintln(e.stdout, "the server lists no versions")
		return nil
	}
	printChangelog(e.stdout, versions, true)
	return nil
}

// printChangelog prints versions, newest first; oldestLast says the last one is the API's first.
func printChangelog(w io.Writer, versions []changelogJSON, oldestLast bool) {
	now := time.Now()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, v := range versions {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		line := clean(v.Version)
		for _, d := range []struct {
			what string
			at   int64
		}{{"released", v.Released}, {"deprecated", v.Deprecated}, {"sunset", v.Sunset}} {
			if d.at == 0 {
				continue
			}
			line += "  " + d.what + " " + versionDate(d.at)
			if d.what == "sunset" && !now.Before(time.Unix(d.at, 0)) {
				line += " (no longer answers)"
			}
		}
		fmt.Fprintln(tw, line)
		if len(v.Changes) == 0 {
			note := "  no changes"
			if oldestLast && i == len(versions)-1 {
				note += ": the first version"
			}
			fmt.Fprintln(tw, note)
		}
		for _, ch := range v.Changes {
			resource := "-"
			if ch.Resource != "" {
				resource = clean(ch.Resource)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", clean(ch.Name), resource, clean(ch.Description))
		}
	}
	_ = tw.Flush()
}

// versionDate is a version's date: the day alone when it falls at midnight UTC, as they usually do.
func versionDate(unix int64) string {
	t := time.Unix(unix, 0).UTC()
	if t.Hour() == 0 && t.Minute() == 0 && t.Second() == 0 {
		return t.Format(time.DateOnly)
	}
	return t.Format(time.RFC3339)
}
