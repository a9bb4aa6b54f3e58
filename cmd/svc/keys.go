package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"text/tabwriter"
	"time"
)

// The licensee's own API keys (apikey.KeysHandler on the server): list, create, get, revoke, roll.

// apiKeyJSON is an API key as the server sends it; the secret only in the answer that created it.
type apiKeyJSON struct {
	ID          string      `json:"id"`
	Environment string      `json:"environment"`
	Restricted  bool        `json:"restricted"`
	Permissions []string    `json:"permissions"`
	Created     int64       `json:"created"`
	ExpiresAt   *int64      `json:"expires_at"`
	LastUsedAt  *int64      `json:"last_used_at"`
	Secret      string      `json:"secret,omitempty"`
	Previous    *apiKeyJSON `json:"previous_key,omitempty"`
}

// permissionsFlag collects --permission, repeatable, each value one permission or several
// comma-separated.
type permissionsFlag []string

func (p *permissionsFlag) String() string { return strings.Join(*p, ",") }

func (p *permissionsFlag) Set(s string) error {
	for perm := range strings.SplitSeq(s, ",") {
		perm = strings.TrimSpace(perm)
		resource, action, ok := strings.Cut(perm, ":")
		if !ok || resource == "" || (action != "read" && action != "write") {
			return fmt.Errorf("%q is not a permission: want RESOURCE:read or RESOURCE:write, such as orders:write", perm)
		}
		*p = append(*p, perm)
	}
	return nil
}

// secretWarning is said, on stderr, wherever a key's secret is printed.
const secretWarning = "svc: store the new API key's secret now, somewhere safe (a secret manager, SVC_API_KEY): it is shown this once, the server keeps only its hash, and it cannot be shown again\n"

func runKeysList(ctx context.Context, e env, args []string) error {
	var (
		cm      common
		jsonOut bool
	)
	f := newFlags(e, "svc keys list", "[flags]", `
List the API keys of the key's licensee in the key's environment that still work, oldest first: a
rolled key is listed until the end its roll set. Their secrets are not shown: each was shown once,
when the key was created.`)
	cm.register(f.FlagSet)
	f.BoolVar(&jsonOut, "json", false, "print the server's answer as JSON")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	_, c, err := apiClient(e, cm)
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodGet, "/api_keys", nil, "")
	if err != nil {
		return err
	}
	if jsonOut {
		return printJSON(e.stdout, resp.body)
	}
	var list struct {
		Data []apiKeyJSON `json:"data"`
	}
	if err := resp.decode(&list); err != nil {
		return err
	}
	if len(list.Data) == 0 {
		fmt.Fprintln(e.stdout, "no API keys")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPERMISSIONS\tCREATED\tENDS\tLAST USED")
	for _, k := range list.Data {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", clean(k.ID), permissionsText(k.Permissions), time.Unix(k.Created, 0).UTC().Format(time.RFC3339),
			orText(k.ExpiresAt, "never"), orText(k.LastUsedAt, "never"))
	}
	return tw.Flush()
}

func runKeysCreate(ctx context.Context, e env, args []string) error {
	var (
		cm    common
		m     mutation
		perms permissionsFlag
	)
	f := newFlags(e, "svc keys create", "[--permission RESOURCE:read|write]… [--export] [flags]", `
Create an API key for the key's licensee, in the key's environment, and print its secret: it is shown
this once (the server keeps only its hash), so store it at once. With --permission, the key is
restricted to those permissions (write includes read; 'svc keys get' of your key, or the server's
OpenAPI document, names them); without, it has the permissions of the key that asks — the full key
for a full key. A restricted key hands out only permissions it has itself.

  svc keys create --permission orders:write --permission events:read
  eval "$(svc keys create --permission orders:read --export)"   # sets SVC_API_KEY to the new key`)
	cm.register(f.FlagSet)
	m.register(f, "SVC_API_KEY")
	f.Var(&perms, "permission", "a `permission` of the new key, RESOURCE:read or RESOURCE:write (repeatable, or comma-separated)")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	body := map[string]any{}
	if len(perms) > 0 {
		body["permissions"] = []string(perms)
	}
	_, c, err := apiClient(e, cm)
	if err != nil {
		return err
	}
	resp, err := m.send(ctx, e, c, http.MethodPost, "/api_keys", body)
	if err != nil {
		return err
	}
	if secretOmitted(resp) {
		revoke := "find it with 'svc keys list' and revoke it ('svc keys revoke')"
		if id := path.Base(resp.header.Get("Location")); checkKeyID(id) == nil {
			revoke = "revoke it ('svc keys revoke " + id + "')"
		}
		return fmt.Errorf("the key was created by the first request with Idempotency-Key %s, but the server does not keep answers that carry a secret, so its secret cannot be shown again: %s and create another", m.key, revoke)
	}
	return printNewKey(e, resp, &m, "created")
}

func runKeysGet(ctx context.Context, e env, args []string) error {
	var (
		cm      common
		jsonOut bool
	)
	f := newFlags(e, "svc keys get", "KEY_ID [flags]", `
Show an API key: its environment, its permissions (or that it is the full key), when it was created,
when it ends and when it was last used (to the minute). Its secret is not shown: it was shown once,
when the key was created.`)
	cm.register(f.FlagSet)
	f.BoolVar(&jsonOut, "json", false, "print the server's answer as JSON")
	if err := f.parse(args, 1); err != nil {
		return err
	}
	id, c, err := keyCommand(e, cm, f)
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodGet, "/api_keys/"+id, nil, "")
	if err != nil {
		return err
	}
	return printKey(e.stdout, resp, jsonOut, "")
}

func runKeysRevoke(ctx context.Context, e env, args []string) error {
	var (
		cm common
		m  mutation
	)
	f := newFlags(e, "svc keys revoke", "KEY_ID [flags]", `
Revoke an API key now: from the server's answer on, it authenticates nothing, on every replica. To
replace a key without downtime, roll it instead ('svc keys roll'). Revoking the key svc uses is
allowed, and final.`)
	cm.register(f.FlagSet)
	m.register(f, "")
	if err := f.parse(args, 1); err != nil {
		return err
	}
	id, c, err := keyCommand(e, cm, f)
	if err != nil {
		return err
	}
	resp, err := m.send(ctx, e, c, http.MethodDelete, "/api_keys/"+id, nil)
	if err != nil {
		return err
	}
	return printKey(e.stdout, resp, m.jsonOut, " revoked: it authenticates nothing from now on"+replayNote(resp))
}

func runKeysRoll(ctx context.Context, e env, args []string) error {
	var (
		cm        common
		m         mutation
		expiresIn time.Duration
	)
	f := newFlags(e, "svc keys roll", "KEY_ID [--expires-in DURATION] [--export] [flags]", `
Replace an API key without downtime: the server issues a new key with the same permissions, printed
here once (store it at once), and ends the old one after --expires-in (the server's default is 24h;
at most 168h; 0s ends it at once). Both work until then: deploy the new key, then let the old one
end. A key already set to end (rolled or revoked) is not rolled again: roll the key that replaced it.

  eval "$(svc keys roll key_… --expires-in 1h --export)"   # sets SVC_API_KEY to the new key`)
	cm.register(f.FlagSet)
	m.register(f, "SVC_API_KEY")
	f.DurationVar(&expiresIn, "expires-in", 0, "how long the old key keeps working, such as 24h or 0s (default: the server's, 24h; at most 168h)")
	if err := f.parse(args, 1); err != nil {
		return err
	}
	var body any
	given := false
	f.Visit(func(fl *flag.Flag) { given = given || fl.Name == "expires-in" })
	if given {
		if expiresIn < 0 || expiresIn%time.Second != 0 {
			return usagef("svc keys roll: --expires-in %s must be whole seconds, 0s or more: 0s ends the old key at once", expiresIn)
		}
		body = map[string]int64{"expires_in": int64(expiresIn / time.Second)}
	}
	id, c, err := keyCommand(e, cm, f)
	if err != nil {
		return err
	}
	resp, err := m.send(ctx, e, c, http.MethodPost, "/api_keys/"+id+"/roll", body)
	if err != nil {
		return err
	}
	if secretOmitted(resp) {
		next := "find it with 'svc keys list'"
		if nid := path.Base(resp.header.Get("Location")); checkKeyID(nid) == nil {
			next = nid
		}
		return fmt.Errorf("%s was rolled by the first request with Idempotency-Key %s, but the server does not keep answers that carry a secret, so the new key's cannot be shown again: revoke the new key (%s) and create another with 'svc keys create'",
			id, m.key, next)
	}
	return printNewKey(e, resp, &m, "rolled from "+id)
}

// keyCommand checks the command's key ID argument and loads the configuration and client.
func keyCommand(e env, cm common, f *flags) (string, *client, error) {
	id := f.arg(0)
	if err := checkKeyID(id); err != nil {
		return "", nil, usagef("%s: %v", f.Name(), err)
	}
	_, c, err := apiClient(e, cm)
	return id, c, err
}

// checkKeyID refuses, before any request, an ID that cannot be one: it goes into a URL path.
func checkKeyID(id string) error {
	if id == "" {
		return fmt.Errorf("the key's ID is required, key_… ('svc keys list' shows them)")
	}
	rest, ok := strings.CutPrefix(id, "key_")
	if !ok || rest == "" || len(id) > 64 {
		return fmt.Errorf("%q is not an API key ID: they look like key_…", id)
	}
	for _, c := range rest {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%q is not an API key ID: they look like key_…", id)
		}
	}
	return nil
}

// printNewKey prints a key the server just made — its secret once, with the warning to store it —
// and, for a roll, until when the old key works.
func printNewKey(e env, resp *response, m *mutation, done string) error {
	if m.jsonOut {
		fmt.Fprint(e.stderr, secretWarning)
		return printJSON(e.stdout, resp.body)
	}
	var k apiKeyJSON
	if err := resp.decode(&k); err != nil {
		return err
	}
	if k.Secret == "" {
		return fmt.Errorf("the server's answer carries no secret")
	}
	fmt.Fprint(e.stderr, secretWarning)
	if m.exportTo {
		fmt.Fprintf(e.stdout, "export %s=%s\n", envAPIKey, shellQuote(k.Secret))
		return nil
	}
	fmt.Fprintf(e.stdout, "API key %s %s%s\n", clean(k.ID), done, replayNote(resp))
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  secret\t%s\t(shown once: store it now; it cannot be shown again)\n", clean(k.Secret))
	keyRows(tw, &k)
	if p := k.Previous; p != nil {
		// Judged on the server's clock: the new key was created at the roll.
		if p.ExpiresAt != nil && *p.ExpiresAt > k.Created {
			fmt.Fprintf(tw, "  old key\t%s works until %s\t(deploy the new key before then)\n", clean(p.ID), unixTime(p.ExpiresAt))
		} else {
			fmt.Fprintf(tw, "  old key\t%s no longer works\t(whatever still sends it is refused: give it the new key)\n", clean(p.ID))
		}
	}
	return tw.Flush()
}

// printKey prints the key answered: "API key key_…" and what, then its settings.
func printKey(w io.Writer, resp *response, jsonOut bool, what string) error {
	if jsonOut {
		return printJSON(w, resp.body)
	}
	var k apiKeyJSON
	if err := resp.decode(&k); err != nil {
		return err
	}
	fmt.Fprintf(w, "API key %s%s\n", clean(k.ID), what)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	keyRows(tw, &k)
	return tw.Flush()
}

// keyRows writes a key's settings, a "  name\tvalue" row each.
func keyRows(w io.Writer, k *apiKeyJSON) {
	fmt.Fprintf(w, "  environment\t%s\n  permissions\t%s\n", clean(k.Environment), permissionsText(k.Permissions))
	fmt.Fprintf(w, "  created\t%s\n  ends\t%s\n  last used\t%s\n", time.Unix(k.Created, 0).UTC().Format(time.RFC3339),
		orText(k.ExpiresAt, "never"), orText(k.LastUsedAt, "never (recorded to the minute)"))
}

// permissionsText is a key's permissions as a person reads them.
func permissionsText(perms []string) string {
	if perms == nil {
		return "all (the full key)"
	}
	return clean(strings.Join(perms, ", "))
}

// orText is a Unix time of the server's, or none when it has none.
func orText(t *int64, none string) string {
	if t == nil {
		return none
	}
	return unixTime(t)
}
