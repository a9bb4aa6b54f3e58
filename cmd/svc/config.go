package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// maxConfigFile bounds what svc reads of its config file.
const maxConfigFile = 64 << 10

// permsMatter: Unix permission bits say who may read and write a file; elsewhere they do not.
var permsMatter = runtime.GOOS != "windows"

// Environment variables. SVC_API_KEY, SVC_BASE_URL and SVC_WEBHOOK_SECRET are the names the
// reference consumer and the end-to-end tests use too.
const (
	envAPIKey     = "SVC_API_KEY"
	envBaseURL    = "SVC_BASE_URL"
	envSecret     = "SVC_WEBHOOK_SECRET"
	envAdminToken = "SVC_ADMIN_TOKEN"
	envAPIVersion = "SVC_API_VERSION"
	envEndpoint   = "SVC_ENDPOINT"
	envConfig     = "SVC_CONFIG"
)

const (
	defaultBaseURL    = "http://127.0.0.1:8080" // the reference server's default address
	defaultAPIVersion = "v1"
)

const configHelp = `Configuration (each value from the environment, else from the config file):
  SVC_API_KEY         the API key, sk_sandbox_… or sk_live_…           (config: api_key)
  SVC_BASE_URL        the server, default http://127.0.0.1:8080        (config: base_url; flag --base-url)
  SVC_WEBHOOK_SECRET  the endpoint's signing secret, whsec_…; several,
                      comma-separated, while a secret rotates          (config: webhook_secret)
  SVC_ADMIN_TOKEN     the operator's token, for 'credentials new'      (config: admin_token)
  SVC_API_VERSION     the version the key's licensee is pinned to,
                      default v1                                       (config: api_version; flag --api-version)
  SVC_ENDPOINT        the default webhook endpoint, we_…               (config: endpoint; flag --endpoint)
  SVC_CONFIG          the config file, default $XDG_CONFIG_HOME/svc/config (~/.config/svc/config)
The config file holds "name = value" lines and # comments. It must be yours (or root's) and not be
writable by other users, as ssh requires of its config; svc warns when others can read it. Secrets
are never taken from flags: a command line is visible to every user of the machine (ps).
`

// config is what svc knows about the server and the caller.
type config struct {
	BaseURL       string
	APIKey        string
	Secrets       []string
	AdminToken    string
	APIVersion    string
	Endpoint      string
	file          string // the config file read, if any, for messages
	baseURLSource string // where BaseURL came from, for messages
}

// configKeys are the config file's names, with the environment variables that override them.
var configKeys = map[string]string{
	"api_key":        envAPIKey,
	"base_url":       envBaseURL,
	"webhook_secret": envSecret,
	"admin_token":    envAdminToken,
	"api_version":    envAPIVersion,
	"endpoint":       envEndpoint,
}

// secretFlags are flags people reach for that svc refuses, with where the value goes instead.
var secretFlags = map[string]string{
	"api-key": envAPIKey, "key": envAPIKey, "secret": envSecret, "webhook-secret": envSecret,
	"admin-token": envAdminToken, "token": envAdminToken,
}

// common are the flags every command that talks to a server shares.
type common struct {
	baseURL    string
	apiVersion string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.baseURL, "base-url", "", "the server (default $"+envBaseURL+", the config file, or "+defaultBaseURL+")")
	fs.StringVar(&c.apiVersion, "api-version", "", "the API version the key's licensee is pinned to (default $"+envAPIVersion+", the config file, or "+defaultAPIVersion+")")
}

// loadConfig reads the config file (when there is one) and the environment; the environment wins,
// and the common flags win over both.
func loadConfig(e env, c common) (*config, error) {
	values := map[string]string{}
	cfg := &config{}
	path, explicit := e.getenv(envConfig), true
	if path == "" {
		explicit = false
		if dir := configDir(e.getenv); dir != "" {
			path = filepath.Join(dir, "svc", "config")
		}
	}
	if path != "" {
		file, err := readConfigFile(path, e.uid, e.stderr)
		switch {
		case err == nil:
			values, cfg.file = file, path
		case errors.Is(err, os.ErrNotExist) && !explicit:
		default:
			return nil, usagef("%v", err)
		}
	}
	get := func(key string) (string, string) {
		if v := strings.TrimSpace(e.getenv(configKeys[key])); v != "" {
			return v, "$" + configKeys[key]
		}
		if v := values[key]; v != "" {
			return v, cfg.file
		}
		return "", ""
	}
	cfg.APIKey, _ = get("api_key")
	cfg.AdminToken, _ = get("admin_token")
	cfg.Endpoint, _ = get("endpoint")
	if s, _ := get("webhook_secret"); s != "" {
		for part := range strings.SplitSeq(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				cfg.Secrets = append(cfg.Secrets, part)
			}
		}
	}
	cfg.BaseURL, cfg.baseURLSource = get("base_url")
	if c.baseURL != "" {
		cfg.BaseURL, cfg.baseURLSource = c.baseURL, "--base-url"
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL, cfg.baseURLSource = defaultBaseURL, "the default"
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" {
		return nil, usagef("base URL %q (from %s) must be an absolute http or https URL with a host and no user, query or fragment",
			cfg.BaseURL, cfg.baseURLSource)
	}
	cfg.BaseURL = strings.TrimSuffix(cfg.BaseURL, "/")
	cfg.APIVersion, _ = get("api_version")
	if c.apiVersion != "" {
		cfg.APIVersion = c.apiVersion
	}
	if cfg.APIVersion == "" {
		cfg.APIVersion = defaultAPIVersion
	}
	if !validVersion(cfg.APIVersion) {
		return nil, usagef("API version %q must look like v1, v2, …", cfg.APIVersion)
	}
	return cfg, nil
}

// configDir is $XDG_CONFIG_HOME, or the platform's user configuration directory.
func configDir(getenv func(string) string) string {
	if d := getenv("XDG_CONFIG_HOME"); d != "" {
		return d
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return d
}

func validVersion(v string) bool {
	if len(v) < 2 || len(v) > 8 || v[0] != 'v' || v[1] == '0' {
		return false
	}
	for _, c := range v[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// readConfigFile parses "name = value" lines. As ssh does with its config, a file that is not the
// user's (or root's), or that others may write, is refused — whoever can change base_url can send the
// API key to a server of theirs — and one others may read gets a warning. The checks are made on the
// file opened, not on its name, so it cannot be swapped between the check and the read.
func readConfigFile(path string, uid int, stderr io.Writer) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("config file %s is not a regular file", path)
	}
	if err := checkOwner("config file", path, info, uid); err != nil {
		return nil, err
	}
	if perm := info.Mode().Perm(); perm&0o022 != 0 && permsMatter {
		return nil, fmt.Errorf("config file %s is writable by other users (mode %v): chmod 600 it", path, perm)
	} else if perm&0o044 != 0 && permsMatter {
		fmt.Fprintf(stderr, "svc: warning: config file %s is readable by other users (mode %v); chmod 600 it\n", path, perm)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfigFile {
		return nil, fmt.Errorf("config file %s is over %d bytes: it holds a few \"name = value\" lines", path, maxConfigFile)
	}
	values := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" {
			return nil, fmt.Errorf("config file %s:%d: want \"name = value\"", path, n)
		}
		if _, known := configKeys[name]; !known {
			return nil, fmt.Errorf("config file %s:%d: unknown name %q (known: api_key, base_url, webhook_secret, admin_token, api_version, endpoint)",
				path, n, name)
		}
		if _, dup := values[name]; dup {
			return nil, fmt.Errorf("config file %s:%d: %s is set twice", path, n, name)
		}
		values[name] = strings.Trim(value, `"`)
	}
	return values, sc.Err()
}

// checkOwner refuses a file (or directory) that is neither the user's nor root's: its owner could
// change it. uid < 0 (no Unix users) checks nothing.
func checkOwner(what, path string, info os.FileInfo, uid int) error {
	owner, ok := fileOwner(info)
	if !ok || uid < 0 || owner == uid || owner == 0 {
		return nil
	}
	return fmt.Errorf("%s %s is owned by user %d, not by you (user %d) or root: its owner can change it; if it is yours, chown %d it, else remove it",
		what, path, owner, uid, uid)
}

// needAPIKey returns the API key or says where to put it.
func (c *config) needAPIKey() (string, error) {
	if c.APIKey == "" {
		return "", usagef("an API key is needed: set %s (or api_key in the config file)", envAPIKey)
	}
	return c.APIKey, nil
}

func (c *config) needSecrets() ([]string, error) {
	if len(c.Secrets) == 0 {
		return nil, usagef("the endpoint's signing secret is needed: set %s (or webhook_secret in the config file)", envSecret)
	}
	return c.Secrets, nil
}

// errHelpShown: --help was asked for and printed; the command succeeds without doing anything.
var errHelpShown = errors.New("help shown")

// flags is a command's flag set, with the usage text every command prints for --help.
type flags struct {
	*flag.FlagSet
	e          env
	synopsis   string
	about      string
	positional []string
}

func newFlags(e env, path, synopsis, about string) *flags {
	f := &flags{FlagSet: flag.NewFlagSet(path, flag.ContinueOnError), e: e, synopsis: synopsis, about: about}
	f.SetOutput(io.Discard)
	return f
}

func (f *flags) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s %s\n\n%s\n", f.Name(), f.synopsis, strings.TrimSpace(f.about))
	var any bool
	f.VisitAll(func(*flag.Flag) { any = true })
	if any {
		fmt.Fprint(w, "\nFlags:\n")
		f.SetOutput(w)
		f.PrintDefaults()
		f.SetOutput(io.Discard)
	}
	fmt.Fprint(w, "\nRun 'svc help' for the environment, the config file and the exit codes.\n")
}

// parse parses args; --help prints the usage to stdout and returns errHelpShown. A flag carrying a
// secret is refused with where the secret goes instead. maxArgs bounds the positional arguments.
func (f *flags) parse(args []string, maxArgs int) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		// A command may define such a flag for something that is not a secret (requests list's
		// --key, a key's ID); it then refuses a value shaped like a secret itself.
		if env, ok := secretFlags[name]; ok && strings.HasPrefix(a, "-") && f.Lookup(name) == nil {
			return usagef("%s: there is no -%s flag: a command line is visible to every user of the machine (ps); set %s, or put it in the config file",
				f.Name(), name, env)
		}
	}
	// Flags may follow positional arguments ("svc trigger order.created --endpoint we_…"), which
	// package flag alone would take as more arguments.
	f.positional = nil
	for {
		err := f.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			f.usage(f.e.stdout)
			return errHelpShown
		}
		if err != nil {
			return usagef("%s: %v\nRun '%s --help' for its flags.", f.Name(), err, f.Name())
		}
		rest := f.Args()
		if len(rest) == 0 {
			break
		}
		if i := len(args) - len(rest) - 1; i >= 0 && args[i] == "--" { // after "--", all are arguments
			f.positional = append(f.positional, rest...)
			break
		}
		f.positional = append(f.positional, rest[0])
		args = rest[1:]
	}
	if len(f.positional) > maxArgs {
		return usagef("%s: unexpected argument %q\nRun '%s --help' for its usage.", f.Name(), f.positional[maxArgs], f.Name())
	}
	return nil
}

// arg is the i-th positional argument, or "".
func (f *flags) arg(i int) string {
	if i < len(f.positional) {
		return f.positional[i]
	}
	return ""
}
