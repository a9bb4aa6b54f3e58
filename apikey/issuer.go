package apikey

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"time"

	"github.com/svcplatform/conventions/internal/randid"
	"github.com/svcplatform/conventions/webhook"
)

// Defaults of IssuerOptions.
const (
	DefaultSandboxBaseURL = "https://sandbox.svcplatform.dev"
	DefaultLiveBaseURL    = "https://api.svcplatform.dev"
	// DefaultSandboxTTL is how long sandbox credentials last: a technical evaluation's usual span.
	DefaultSandboxTTL = 30 * 24 * time.Hour
	// MaxLicenseeLen bounds a licensee identifier in bytes.
	MaxLicenseeLen = 255
)

// Errors of Issuer.Resolve. The Authenticator answers all three with the same 401, so a client never
// learns which; they exist for the server's own logs and metrics.
var (
	ErrUnknown = errors.New("apikey: unknown API key")
	ErrExpired = errors.New("apikey: API key expired")
	ErrRevoked = errors.New("apikey: API key revoked")
)

// ErrInvalidEvaluation: an Evaluation lacks a usable licensee, environment or lifetime.
var ErrInvalidEvaluation = errors.New("apikey: invalid evaluation")

// IssuerOptions tune an Issuer. A nil *IssuerOptions and the zero value mean the defaults.
type IssuerOptions struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// SandboxBaseURL and LiveBaseURL are returned with the credentials of each environment; empty
	// means DefaultSandboxBaseURL and DefaultLiveBaseURL.
	SandboxBaseURL string
	LiveBaseURL    string
	// SandboxTTL is how long sandbox credentials last; zero means DefaultSandboxTTL.
	SandboxTTL time.Duration
	// LiveTTL is how long production credentials last; zero means they do not expire.
	LiveTTL time.Duration
	// Logger records issuance and revocation (by key ID, never the key); nil logs nothing.
	Logger *slog.Logger
	// Permissions are the permissions the service declares ("orders:read", "orders:write", …: see
	// Require), the only ones a restricted key may be issued with; nil accepts any well-formed one.
	// Each is "<resource>:read" or "<resource>:write".
	Permissions []string
}

// Evaluation asks for credentials: for a technical evaluation in the sandbox, or for production. The
// zero Evaluation has no licensee and is refused.
type Evaluation struct {
	// Licensee identifies the customer: 1 to MaxLicenseeLen bytes of visible ASCII. Required.
	Licensee string
	// Environment of the credentials; zero means Sandbox.
	Environment Environment
	// TTL overrides the environment's default lifetime; zero means the default. Negative is an error.
	TTL time.Duration
	// Permissions restrict the key (see Require); nil means the full key. A restricted key has 1 to
	// MaxPermissions permissions, each declared in IssuerOptions.Permissions.
	Permissions []string
}

// Credentials are what an evaluation starts with. APIKey and WebhookSecret are shown to their owner
// once and never again: only the key's hash is stored. String, GoString and LogValue redact both, so
// Credentials can be logged; encoding/json renders them in full, for the issuance response. They are a
// plain value; the zero Credentials hold no key and grant nothing.
type Credentials struct {
	KeyID         string      `json:"key_id"`
	APIKey        string      `json:"api_key"`
	WebhookSecret string      `json:"webhook_signing_secret"`
	BaseURL       string      `json:"base_url"`
	Licensee      string      `json:"licensee"`
	Environment   Environment `json:"environment"`
	ExpiresAt     time.Time   `json:"expires_at,omitzero"`
	// Permissions restrict the key; nil means the full key.
	Permissions []string `json:"permissions,omitempty"`
}

// String renders the credentials with the key and secret redacted.
func (c Credentials) String() string {
	exp := "never"
	if !c.ExpiresAt.IsZero() {
		exp = c.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("apikey.Credentials{KeyID: %s, APIKey: %s, WebhookSecret: %s, BaseURL: %s, Licensee: %s, Environment: %s, ExpiresAt: %s}",
		c.KeyID, redact(c.APIKey), redact(c.WebhookSecret), c.BaseURL, c.Licensee, c.Environment, exp)
}

// GoString is String, so that %#v redacts too.
func (c Credentials) GoString() string { return c.String() }

// LogValue logs the credentials with the key and secret redacted.
func (c Credentials) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("key_id", c.KeyID),
		slog.String("api_key", redact(c.APIKey)),
		slog.String("licensee", c.Licensee),
		slog.String("environment", string(c.Environment)),
		expiresAttr(c.ExpiresAt),
	)
}

// expiresAttr logs an expiry, or "never" for a credential without one (the zero time).
func expiresAttr(t time.Time) slog.Attr {
	if t.IsZero() {
		return slog.String("expires_at", "never")
	}
	return slog.Time("expires_at", t)
}

// Issuer issues API keys and resolves them back to principals. It is safe for concurrent use. Build
// one with NewIssuer; the zero value is not usable: its Issue, Revoke, EndEvaluation and Resolve
// return ErrNotBuilt, and its Store is nil.
type Issuer struct {
	store      CredentialStore
	now        func() time.Time
	sandboxURL string
	liveURL    string
	sandboxTTL time.Duration
	liveTTL    time.Duration
	log        *slog.Logger
	declared   []string // IssuerOptions.Permissions; nil: any well-formed one
	usage      usage
}

var _ Resolver = (*Issuer)(nil)

// NewIssuer returns an Issuer keeping credentials in store; a nil store means a fresh
// MemoryCredentialStore. A negative TTL (every credential would be born expired) and a base URL that
// is not an absolute http or https URL are errors.
func NewIssuer(store CredentialStore, opts *IssuerOptions) (*Issuer, error) {
	if store == nil {
		store = NewMemoryCredentialStore()
	}
	var o IssuerOptions
	if opts != nil {
		o = *opts
	}
	if o.SandboxTTL < 0 || o.LiveTTL < 0 {
		return nil, fmt.Errorf("apikey: NewIssuer: a TTL is negative (SandboxTTL %v, LiveTTL %v)", o.SandboxTTL, o.LiveTTL)
	}
	for name, raw := range map[string]string{"SandboxBaseURL": o.SandboxBaseURL, "LiveBaseURL": o.LiveBaseURL} {
		if raw == "" {
			continue
		}
		if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("apikey: NewIssuer: %s %q is not an absolute http or https URL", name, raw)
		}
	}
	for _, p := range o.Permissions {
		if err := checkPermission(p); err != nil {
			return nil, fmt.Errorf("apikey: NewIssuer: IssuerOptions.Permissions: %w", err)
		}
	}
	i := &Issuer{store: store, now: o.Now, sandboxURL: o.SandboxBaseURL, liveURL: o.LiveBaseURL,
		sandboxTTL: o.SandboxTTL, liveTTL: o.LiveTTL, log: o.Logger, declared: slices.Clone(o.Permissions)}
	if i.now == nil {
		i.now = time.Now
	}
	if i.sandboxURL == "" {
		i.sandboxURL = DefaultSandboxBaseURL
	}
	if i.liveURL == "" {
		i.liveURL = DefaultLiveBaseURL
	}
	if i.sandboxTTL == 0 {
		i.sandboxTTL = DefaultSandboxTTL
	}
	return i, nil
}

// Store returns the issuer's credential store.
func (i *Issuer) Store() CredentialStore {
	if i == nil {
		return nil
	}
	return i.store
}

// Issue creates credentials for ev: a fresh API key of ev's environment (stored as its hash), a fresh
// webhook signing secret, the environment's base URL, and the expiry.
func (i *Issuer) Issue(ctx context.Context, ev Evaluation) (Credentials, error) {
	c, key, err := i.issue(ctx, ev)
	if err != nil {
		return Credentials{}, err
	}
	creds := i.credentials(c, key)
	creds.WebhookSecret = webhook.NewSecret()
	return creds, nil
}

// issue is Issue, returning the stored credential and its key.
func (i *Issuer) issue(ctx context.Context, ev Evaluation) (Credential, Key, error) {
	if i == nil || i.store == nil {
		return Credential{}, Key{}, errZeroIssuer
	}
	env := ev.Environment
	if env == "" {
		env = Sandbox
	}
	if !env.Valid() {
		return Credential{}, Key{}, fmt.Errorf("%w: environment %q", ErrInvalidEvaluation, env)
	}
	if !validLicensee(ev.Licensee) {
		return Credential{}, Key{}, fmt.Errorf("%w: licensee must be 1 to %d bytes of visible ASCII", ErrInvalidEvaluation, MaxLicenseeLen)
	}
	if ev.TTL < 0 {
		return Credential{}, Key{}, fmt.Errorf("%w: negative TTL", ErrInvalidEvaluation)
	}
	perms, err := i.permissions(ev.Permissions)
	if err != nil {
		return Credential{}, Key{}, fmt.Errorf("%w: %w", ErrInvalidEvaluation, err)
	}
	ttl := ev.TTL
	if ttl == 0 {
		ttl = i.ttl(env)
	}
	c, key, err := newCredential(ev.Licensee, env, perms, i.now(), ttl)
	if err != nil {
		return Credential{}, Key{}, err
	}
	if err := i.store.Put(ctx, c); err != nil {
		return Credential{}, Key{}, fmt.Errorf("apikey: storing credential: %w", err)
	}
	if i.log != nil {
		i.log.InfoContext(ctx, "apikey: credentials issued", "key_id", c.ID, "licensee", c.Licensee,
			"environment", string(env), expiresAttr(c.ExpiresAt), "restricted", c.Permissions != nil)
	}
	return c, key, nil
}

// ttl is the default lifetime of env's keys; zero means they do not expire.
func (i *Issuer) ttl(env Environment) time.Duration {
	if env == Live {
		return i.liveTTL
	}
	return i.sandboxTTL
}

// credentials is what the owner of c is shown once: its key, the environment's base URL, the expiry.
func (i *Issuer) credentials(c Credential, key Key) Credentials {
	base := i.sandboxURL
	if c.Environment == Live {
		base = i.liveURL
	}
	return Credentials{KeyID: c.ID, APIKey: key.Reveal(), BaseURL: base, Licensee: c.Licensee, Environment: c.Environment,
		ExpiresAt: c.ExpiresAt, Permissions: slices.Clone(c.Permissions)}
}

// newCredential makes a fresh key for licensee in env and its credential, created at now and
// expiring ttl later (never, for zero).
func newCredential(licensee string, env Environment, perms []string, now time.Time, ttl time.Duration) (Credential, Key, error) {
	key, err := New(env)
	if err != nil {
		return Credential{}, Key{}, err
	}
	c := Credential{ID: randid.New("key_"), Hash: key.Hash(), Licensee: licensee, Environment: env, CreatedAt: now,
		Permissions: perms}
	if ttl > 0 {
		c.ExpiresAt = now.Add(ttl)
	}
	return c, key, nil
}

// permissions checks a restricted key's permissions against the declared ones and returns them
// sorted, without duplicates; nil (the full key) stays nil.
func (i *Issuer) permissions(perms []string) ([]string, error) {
	if perms == nil {
		return nil, nil
	}
	if len(perms) == 0 || len(perms) > MaxPermissions {
		return nil, fmt.Errorf("%w: a restricted key has 1 to %d permissions, not %d", ErrInvalidPermission, MaxPermissions, len(perms))
	}
	out := make([]string, 0, len(perms))
	for _, p := range perms {
		if err := checkPermission(p); err != nil {
			return nil, err
		}
		if i.declared != nil && !slices.Contains(i.declared, p) {
			return nil, fmt.Errorf("%w: %s is not a permission of this API", ErrInvalidPermission, quoteShort(p))
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Roll replaces the key with the given ID: it issues a new key with the same licensee, environment
// and permissions, and ends the old one after overlap (at once for zero), so that both work until
// then and a deployment can switch without downtime. A key is rolled once: one that has ended, or is
// already set to end (rolled or revoked before), is ErrCredentialEnded — of concurrent rolls of one
// key, one succeeds. An unknown ID is ErrCredentialNotFound, a negative overlap an error. The new
// key's lifetime is its environment's default. The result holds the new key, shown once.
func (i *Issuer) Roll(ctx context.Context, keyID string, overlap time.Duration) (Credentials, error) {
	if i == nil || i.store == nil {
		return Credentials{}, errZeroIssuer
	}
	old, err := i.store.Lookup(ctx, keyID)
	if err != nil {
		return Credentials{}, fmt.Errorf("apikey: rolling %s: %w", keyID, err)
	}
	c, key, _, err := i.roll(ctx, old, overlap)
	if err != nil {
		return Credentials{}, err
	}
	return i.credentials(c, key), nil
}

// roll is Roll of the credential old, already read: it returns the new credential and its key, and
// old as the roll left it.
func (i *Issuer) roll(ctx context.Context, old Credential, overlap time.Duration) (Credential, Key, Credential, error) {
	if overlap < 0 {
		return Credential{}, Key{}, Credential{}, fmt.Errorf("apikey: rolling %s: negative overlap", old.ID)
	}
	now := i.now()
	c, key, err := newCredential(old.Licensee, old.Environment, old.Permissions, now, i.ttl(old.Environment))
	if err != nil {
		return Credential{}, Key{}, Credential{}, err
	}
	end := now.Add(overlap)
	if err := i.store.Roll(ctx, old.ID, c, end); err != nil {
		return Credential{}, Key{}, Credential{}, fmt.Errorf("apikey: rolling %s: %w", old.ID, err)
	}
	if i.log != nil {
		i.log.InfoContext(ctx, "apikey: credential rolled", "key_id", old.ID, "new_key_id", c.ID, "licensee", c.Licensee,
			"environment", string(c.Environment), "old_ends_at", end)
	}
	old.RevokedAt = end // the store rolls only a key not yet set to end
	return c, key, old, nil
}

// Revoke revokes the key with the given ID now. It returns ErrCredentialNotFound for an unknown ID.
func (i *Issuer) Revoke(ctx context.Context, keyID string) error {
	if i == nil || i.store == nil {
		return errZeroIssuer
	}
	if err := i.store.Revoke(ctx, keyID, i.now()); err != nil {
		return fmt.Errorf("apikey: revoking %s: %w", keyID, err)
	}
	if i.log != nil {
		i.log.InfoContext(ctx, "apikey: credential revoked", "key_id", keyID)
	}
	return nil
}

// EndEvaluation revokes every sandbox key of licensee now and returns how many it revoked.
func (i *Issuer) EndEvaluation(ctx context.Context, licensee string) (int, error) {
	if i == nil || i.store == nil {
		return 0, errZeroIssuer
	}
	n, err := i.store.RevokeAll(ctx, licensee, Sandbox, i.now())
	if err != nil {
		return n, fmt.Errorf("apikey: ending the evaluation of %s: %w", licensee, err)
	}
	if i.log != nil {
		i.log.InfoContext(ctx, "apikey: evaluation ended", "licensee", licensee, "revoked", n)
	}
	return n, nil
}

// Resolve returns the principal k authenticates as now. It returns ErrUnknown, ErrExpired or
// ErrRevoked for a key that does not authenticate, and a wrapped store error when the store fails.
func (i *Issuer) Resolve(ctx context.Context, k Key) (Principal, error) {
	if i == nil || i.store == nil {
		return Principal{}, errZeroIssuer
	}
	if !k.env.Valid() {
		return Principal{}, ErrUnknown // the zero Key: never a credential
	}
	h := k.Hash()
	c, err := i.store.Get(ctx, h)
	if errors.Is(err, ErrCredentialNotFound) {
		return Principal{}, ErrUnknown
	}
	if err != nil {
		return Principal{}, fmt.Errorf("apikey: looking up a credential: %w", err)
	}
	// The store found the record by hash; checking the hash again, in constant time, guards against a
	// store that matches loosely (a collation, a prefix index) without leaking how much matched.
	// The environment must agree too: the key's prefix is covered by its checksum and its hash.
	if subtle.ConstantTimeCompare(c.Hash[:], h[:]) != 1 || c.Environment != k.env {
		return Principal{}, ErrUnknown
	}
	now := i.now()
	if !c.RevokedAt.IsZero() && !now.Before(c.RevokedAt) {
		return Principal{}, ErrRevoked
	}
	if !c.ExpiresAt.IsZero() && !now.Before(c.ExpiresAt) {
		return Principal{}, ErrExpired
	}
	i.usage.note(c.ID, c.LastUsedAt, now)
	return Principal{Licensee: c.Licensee, Environment: c.Environment, KeyID: c.ID, ExpiresAt: c.ExpiresAt,
		Permissions: c.Permissions}, nil
}

// validLicensee reports whether s is a usable licensee identifier: 1 to MaxLicenseeLen bytes of
// visible ASCII (0x21–0x7E).
func validLicensee(s string) bool {
	if len(s) == 0 || len(s) > MaxLicenseeLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
