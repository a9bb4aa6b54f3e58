package portal

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"
)

// Defaults of Options.
const (
	// DefaultLinkTTL is how long a minted link may be opened: long enough to pass from a platform's
	// dashboard to a browser, short enough that a link found later in a log or a history is dead.
	DefaultLinkTTL = 10 * time.Minute
	// DefaultSessionTTL is how long a session lasts once its link opened it. It does not slide: a
	// session ends at the latest this long after it began, and the platform mints a new link.
	DefaultSessionTTL = time.Hour
	// MaxTTL bounds LinkTTL and SessionTTL.
	MaxTTL = 24 * time.Hour
)

// Options configure a Portal. API and BaseURL are required; the zero value of every other field
// means its default.
type Options struct {
	// API serves every page's reads and every form's action: the platform's own API handler as it
	// runs after authentication (after the apikey.Authenticator, before the rate limit and the
	// versioning router), with the webhook endpoints API (producer.EndpointsHandler), the delivery
	// operations (producer.DeliveriesHandler), range retrieval (producer.RangeHandler) and, for
	// sandbox sessions, the sandbox controls mounted at their documented paths under the session's
	// version ("/v1/webhook_endpoints", "/v1/sandbox/events", …). The Portal calls it in process
	// with the session's principal in the request's context (apikey.NewContext) and, on every
	// form's action, an Idempotency-Key drawn when the form was shown: each action runs through
	// exactly the validation, idempotency, permissions and tenancy of the API, and a form sent twice
	// acts once.
	API http.Handler
	// BaseURL is the absolute URL the portal is reached at, such as
	// "https://api.example.com/portal": links start with it, its path is the prefix the Portal
	// serves under (mount it there, e.g. mux.Handle("/portal/", p)), and an https scheme makes the
	// session cookie Secure and __Host- prefixed.
	BaseURL string
	// Store keeps links and sessions; replicas share one. Nil means NewMemoryStore().
	Store Store
	// Title names the portal in its header and page titles; empty means "Webhooks".
	Title string
	// LinkTTL is how long a minted link may be opened (once); SessionTTL how long the session it
	// opens lasts. Zero means DefaultLinkTTL and DefaultSessionTTL; at most MaxTTL.
	LinkTTL, SessionTTL time.Duration
	// FrameAncestors lists the origins ("https://dashboard.example.com") allowed to show the portal
	// in a frame, in the Content-Security-Policy's frame-ancestors. Empty means none: the portal
	// refuses to be framed (frame-ancestors 'none', X-Frame-Options: DENY). The session cookie is
	// SameSite=Strict, so a frame works on the same site as the portal (dashboard.example.com
	// framing api.example.com), not across sites.
	FrameAncestors []string
	// APIVersions lists the versions an endpoint's api_version may be set to, offered as a choice;
	// nil means a free text field (the API refuses what it does not serve).
	APIVersions func() []string
	// Now is the clock of links and sessions; nil means time.Now.
	Now func() time.Time
	// Logger records what the visitor is not shown: a Store that failed, an API answer the portal
	// could not read. Nil means none.
	Logger *slog.Logger
}

// Portal serves the web page where a platform's customer manages its webhook endpoints: an
// http.Handler a platform mounts in its own server, at Options.BaseURL's path. Build one with New;
// the zero value is not usable. A Portal is safe for concurrent use.
type Portal struct {
	api          http.Handler
	store        Store
	base         *url.URL
	prefix       string // BaseURL's path, without a trailing slash
	secure       bool
	cookie       string
	title        string
	linkTTL      time.Duration
	sessionTTL   time.Duration
	csp          string
	frameDeny    bool
	versions     func() []string
	now          func() time.Time
	log          *slog.Logger
	pages        map[string]*template.Template
	handler      http.Handler
	crossOrigin  *http.CrossOriginProtection
	assetVersion string
}

// New returns a Portal configured by opts.
func New(opts *Options) (*Portal, error) {
	if opts == nil || opts.API == nil {
		return nil, errors.New("portal: New needs Options.API, the handler that serves the portal's actions")
	}
	base, err := url.Parse(opts.BaseURL)
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" || base.RawQuery != "" ||
		base.Fragment != "" || base.User != nil {
		return nil, fmt.Errorf("portal: Options.BaseURL %q is not an absolute http(s) URL without query, fragment or user", opts.BaseURL)
	}
	p := &Portal{api: opts.API, store: opts.Store, base: base, prefix: strings.TrimSuffix(base.Path, "/"),
		secure: base.Scheme == "https", title: cmp.Or(opts.Title, "Webhooks"),
		linkTTL: cmp.Or(opts.LinkTTL, DefaultLinkTTL), sessionTTL: cmp.Or(opts.SessionTTL, DefaultSessionTTL),
		versions: opts.APIVersions, now: opts.Now, log: opts.Logger}
	if p.prefix != "" && !plainPath(p.prefix) {
		return nil, fmt.Errorf("portal: Options.BaseURL's path %q is not a plain absolute path", base.Path)
	}
	for _, d := range []time.Duration{p.linkTTL, p.sessionTTL} {
		if d < 0 || d > MaxTTL {
			return nil, fmt.Errorf("portal: LinkTTL and SessionTTL must be between 0 and %v", MaxTTL)
		}
	}
	if p.store == nil {
		p.store = NewMemoryStore()
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.cookie = "portal_session"
	if p.secure {
		p.cookie = "__Host-portal_session"
	}
	ancestors := "'none'"
	if len(opts.FrameAncestors) > 0 {
		for _, o := range opts.FrameAncestors {
			u, err := url.Parse(o)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") ||
				u.RawQuery != "" || u.Fragment != "" || u.User != nil || strings.ContainsAny(o, " ;,'\"") {
				return nil, fmt.Errorf("portal: Options.FrameAncestors: %q is not an origin such as https://dashboard.example.com", o)
			}
		}
		ancestors = strings.Join(opts.FrameAncestors, " ")
	} else {
		p.frameDeny = true
	}
	// No inline script or style, nothing from another origin; forms post only to the portal.
	p.csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
		"form-action 'self'; base-uri 'none'; frame-ancestors " + ancestors
	if p.pages, err = parsePages(); err != nil {
		return nil, err
	}
	p.assetVersion = assetVersion()
	// A form posted from another origin is refused (403) before any handler runs; the SameSite=Strict
	// cookie would not go with it anyway.
	p.crossOrigin = http.NewCrossOriginProtection()
	p.crossOrigin.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.fail(w, r, nil, http.StatusForbidden, "This form was sent from another site",
			"The portal accepts forms only from its own pages. Open the portal and try again.")
	}))
	p.handler = p.crossOrigin.Handler(p.routes())
	return p, nil
}

// ServeHTTP implements http.Handler: every answer carries the portal's security headers, and a form
// posted from another origin is refused.
func (p *Portal) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", p.csp)
	if p.frameDeny {
		h.Set("X-Frame-Options", "DENY")
	}
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if p.secure {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	p.handler.ServeHTTP(w, r)
}

// Link is a minted portal link: opened once before ExpiresAt, it starts a session. It is a plain
// value; the zero value is no link.
type Link struct {
	// URL is the link, a secret: BaseURL, "/login" and a one-time token.
	URL string
	// ExpiresAt is when it stops working if it was not opened.
	ExpiresAt time.Time
}

// NewLink mints a one-time link to the portal for s's licensee and environment, with s's
// permissions and version; s.ExpiresAt is ignored (the link lives LinkTTL). The link's token is 256
// random bits; the Store keeps only a hash of it.
func (p *Portal) NewLink(ctx context.Context, s Session) (Link, error) {
	if s.Licensee == "" || !s.Environment.Valid() {
		return Link{}, errors.New("portal: NewLink needs a Session with a licensee and a valid environment")
	}
	now := p.now()
	s.ExpiresAt = now.Add(p.linkTTL)
	token := newSecret()
	if err := p.store.Put(ctx, storeKey("link", token), s, now); err != nil {
		return Link{}, fmt.Errorf("portal: storing a link: %w", err)
	}
	u := *p.base
	u.Path = p.prefix + "/login"
	u.RawQuery = url.Values{"token": {token}}.Encode()
	return Link{URL: u.String(), ExpiresAt: s.ExpiresAt}, nil
}

// newSecret returns 256 random bits, base64url without padding: a link's token, a session's cookie.
func newSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// storeKey is the Store key of a secret of one kind ("link", "session"): a hash, so that what the
// Store holds opens nothing, and a link's token is never a session's cookie.
func storeKey(kind, secret string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + secret))
	return hex.EncodeToString(sum[:])
}

// validSecret reports whether s has the shape newSecret gives, so that junk never reaches the Store.
func validSecret(s string) bool {
	if len(s) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil
}

// session returns the request's session, or false when its cookie is missing, malformed, unknown or
// expired; err is the Store's failure.
func (p *Portal) session(r *http.Request) (Session, bool, error) {
	c, err := r.Cookie(p.cookie)
	if err != nil || !validSecret(c.Value) {
		return Session{}, false, nil
	}
	s, err := p.store.Get(r.Context(), storeKey("session", c.Value), p.now())
	switch {
	case errors.Is(err, ErrNotFound):
		return Session{}, false, nil
	case err != nil:
		return Session{}, false, err
	}
	return s, true, nil
}

// setCookie sets (value non-empty, until expires) or clears the session cookie.
func (p *Portal) setCookie(w http.ResponseWriter, value string, expires time.Time) {
	c := &http.Cookie{Name: p.cookie, Value: value, Path: "/", HttpOnly: true, Secure: p.secure,
		SameSite: http.SameSiteStrictMode}
	if value == "" {
		c.MaxAge = -1
	} else {
		c.Expires = expires
	}
	if !p.secure {
		c.Path = p.prefix + "/"
	}
	http.SetCookie(w, c)
}

// plainPath reports whether s is a clean absolute path of ASCII letters, digits and "-._~": the
// ServeMux patterns the Portal builds on it take it as it is. A space would split a pattern, braces
// make wildcards, and an empty or dot segment a pattern that can never match: ServeMux panics on
// each, and New must return an error instead.
func plainPath(s string) bool {
	if !strings.HasPrefix(s, "/") || path.Clean(s) != s {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && !strings.ContainsRune("/-._~", c) {
			return false
		}
	}
	return true
}

// path returns the portal's path for rel ("/endpoints").
func (p *Portal) path(rel string) string { return p.prefix + rel }

// pattern returns a ServeMux pattern for rel under the prefix: pattern("GET", "/endpoints").
func (p *Portal) pattern(method, rel string) string { return method + " " + p.prefix + rel }

// can reports whether s's permissions include perm ("webhook_endpoints:write" includes its read);
// the pages hide what the session cannot do, and the API refuses it anyway.
func (s Session) can(perm string) bool {
	if s.Permissions == nil {
		return true
	}
	if slices.Contains(s.Permissions, perm) {
		return true
	}
	if res, ok := strings.CutSuffix(perm, ":read"); ok {
		return slices.Contains(s.Permissions, res+":write")
	}
	return false
}
