package apikey

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/internal/reqnote"
)

// HeaderAuthorization carries the API key: "Authorization: Bearer <API_KEY>".
const HeaderAuthorization = "Authorization"

// Codes of the problems the Authenticator writes.
const (
	CodeMissing           = "api_key_missing"            // 401: no Authorization header
	CodeMalformed         = "api_key_malformed"          // 401: not "Bearer <key>", or the key fails Parse
	CodeSchemeUnsupported = "auth_scheme_unsupported"    // 401: another scheme than Bearer (Basic, a bare key)
	CodeInvalid           = "api_key_invalid"            // 401: unknown, expired or revoked — never says which
	CodeUnavailable       = "authentication_unavailable" // 503: the Resolver failed; Retry-After says when to retry
)

// Errors of Authenticator.Authenticate besides those of Parse and Resolve. Each error Authenticate
// returns also wraps the *apierror.Error to answer with, so apierror.Write renders it directly.
var (
	// ErrNoCredentials: the request has no Authorization header (or an empty one).
	ErrNoCredentials = errors.New("apikey: no Authorization header")
	// ErrNotBearer: the Authorization header is not a single "Bearer <token>".
	ErrNotBearer = errors.New("apikey: Authorization header is not Bearer <API key>")
	// ErrAuthScheme: the Authorization header uses another scheme than Bearer. It wraps ErrNotBearer.
	ErrAuthScheme = fmt.Errorf("%w: another authentication scheme", ErrNotBearer)
)

// Resolver turns a well-formed key into the principal it authenticates, or ErrUnknown, ErrExpired or
// ErrRevoked; any other error means the lookup itself failed. *Issuer implements
// it. Implementations must be safe for concurrent use.
type Resolver interface {
	Resolve(ctx context.Context, k Key) (Principal, error)
}

// DefaultRetryAfter is the Retry-After of the 503 the Authenticator writes when the Resolver fails.
const DefaultRetryAfter = time.Second

// AuthenticatorOptions tune an Authenticator. A nil *AuthenticatorOptions and the zero value mean the
// defaults.
type AuthenticatorOptions struct {
	// Problems writes the problem responses (its TypeBase and Logger). Fields left empty come from the
	// Writer apierror.Writer.Handler put in the request's context, else apierror's defaults.
	Problems apierror.Writer
	// Logger records refused credentials (the reason and a redacted key, never the key) at Info, and
	// resolver failures at Error; nil logs nothing.
	Logger *slog.Logger
	// RetryAfter is sent with the 503 written when the Resolver fails; zero means DefaultRetryAfter.
	RetryAfter time.Duration
	// Realm names the protection space in every challenge (RFC 6750 §3); empty means
	// apierror.DefaultRealm.
	Realm string
	// Hooks, when set, are told the outcome of every authentication (never the key), for metrics
	// and traces (otelconv fills them). A nil *Hooks, and a nil field, call nothing, at no cost.
	Hooks *Hooks
}

// Authenticator is the authentication middleware: it reads "Authorization: Bearer <key>", checks the
// key's shape and checksum, resolves it, and puts the Principal in the request context. Missing or
// malformed credentials get a 401 located at the Authorization header; unknown, expired and revoked
// keys all get the same 401, which does not say which; a failing Resolver gets a 503, never a 401 that
// would make a client discard a good key. No response or log line contains the key. Every 401 carries
// an RFC 6750 §3 challenge with the realm: a bare one (`Bearer realm="svcplatform"`) when the request
// has no credentials or uses another scheme, `error="invalid_request"` when the header is not one
// "Bearer <token>", and `error="invalid_token"` when the token is malformed, fails its checksum, or is
// unknown, expired or revoked.
//
// An Authenticator is safe for concurrent use. Build one with NewAuthenticator; the zero value is not
// usable: its Authenticate returns ErrNotBuilt and its Handler answers the opaque 500.
type Authenticator struct {
	resolver   Resolver
	writer     apierror.Writer
	log        *slog.Logger
	retryAfter time.Duration
	realm      string
	// authenticated is Hooks.Authenticated, nil for none.
	authenticated func(context.Context, Observation)
}

// NewAuthenticator returns an Authenticator that resolves keys with r; a nil r is an error.
func NewAuthenticator(r Resolver, opts *AuthenticatorOptions) (*Authenticator, error) {
	if r == nil {
		return nil, errors.New("apikey: NewAuthenticator needs a Resolver")
	}
	a := &Authenticator{resolver: r, retryAfter: DefaultRetryAfter, realm: apierror.DefaultRealm}
	if opts != nil {
		a.writer, a.log = opts.Problems, opts.Logger
		if opts.Hooks != nil {
			a.authenticated = opts.Hooks.Authenticated
		}
		if opts.RetryAfter > 0 {
			a.retryAfter = opts.RetryAfter
		}
		if opts.Realm != "" {
			a.realm = opts.Realm
		}
	}
	return a, nil
}

// problemError carries both the condition (for errors.Is and logs) and the problem (for apierror.Write).
type problemError struct {
	cause   error
	problem *apierror.Error
}

func (e *problemError) Error() string   { return e.cause.Error() }
func (e *problemError) Unwrap() []error { return []error{e.cause, e.problem} }

// The problems are built per call: an *apierror.Error is mutable, and sharing one between requests
// would let one handler's change leak into another's response.
func (a *Authenticator) problemMissing() *apierror.Error {
	return apierror.Unauthenticated(CodeMissing,
		"header Authorization is required: send Authorization: Bearer <API key>",
		apierror.Header(HeaderAuthorization, CodeMissing, "header Authorization is required")).
		WithHeader("WWW-Authenticate", apierror.BearerChallenge(a.realm, ""))
}

// problemScheme answers another scheme: RFC 6750 §3.1 gives no error code to a client that tried an
// authentication method the server does not support.
func (a *Authenticator) problemScheme() *apierror.Error {
	const detail = "must use the Bearer scheme: send Authorization: Bearer <API key>"
	return apierror.Unauthenticated(CodeSchemeUnsupported, "header Authorization "+detail,
		apierror.Header(HeaderAuthorization, CodeSchemeUnsupported, detail)).
		WithHeader("WWW-Authenticate", apierror.BearerChallenge(a.realm, ""))
}

// problemMalformed answers a header that is not one "Bearer <token>" (invalid_request) or a token that
// is not a well-formed key (invalid_token).
func (a *Authenticator) problemMalformed(errorCode, detail string) *apierror.Error {
	return apierror.Unauthenticated(CodeMalformed, "header Authorization: "+detail,
		apierror.Header(HeaderAuthorization, CodeMalformed, detail)).
		WithHeader("WWW-Authenticate", apierror.BearerChallenge(a.realm, errorCode))
}

func (a *Authenticator) problemInvalid() *apierror.Error {
	const detail = "the API key is not valid: it is unknown, expired or revoked"
	return apierror.Unauthenticated(CodeInvalid, detail,
		apierror.Header(HeaderAuthorization, CodeInvalid, detail)).
		WithHeader("WWW-Authenticate", apierror.BearerChallenge(a.realm, "invalid_token"))
}

// Authenticate is the middleware's decision without HTTP: the principal r's credentials resolve to,
// or an error. Errors wrap a condition (ErrNoCredentials, ErrNotBearer, ErrMalformed, ErrChecksum,
// ErrUnknown, ErrExpired, ErrRevoked, or the resolver's failure) and the *apierror.Error to answer
// with; neither contains the key.
func (a *Authenticator) Authenticate(r *http.Request) (Principal, error) {
	if a == nil || a.resolver == nil {
		return Principal{}, &problemError{cause: errZeroAuthenticator, problem: apierror.Internal()}
	}
	hook := a.authenticated
	if hook == nil {
		p, _, _, err := a.authenticate(r)
		return p, err
	}
	start := time.Now()
	p, res, env, err := a.authenticate(r)
	hook(r.Context(), Observation{Outcome: res, Environment: env, Licensee: p.Licensee, Duration: time.Since(start)})
	return p, err
}

// authenticate is Authenticate with the outcome and the key's environment for the Hooks.
func (a *Authenticator) authenticate(r *http.Request) (Principal, Outcome, Environment, error) {
	token, err := a.bearerToken(r.Header)
	if err != nil {
		res := OutcomeMalformed
		switch {
		case errors.Is(err, ErrNoCredentials):
			res = OutcomeMissing
		case errors.Is(err, ErrAuthScheme):
			res = OutcomeSchemeUnsupported
		}
		return Principal{}, res, "", err
	}
	k, err := Parse(token)
	if err != nil {
		res := OutcomeMalformed
		detail := "the API key is malformed: want sk_sandbox_ or sk_live_ followed by 40 characters of a-z and 2-7"
		if errors.Is(err, ErrChecksum) {
			res = OutcomeChecksumMismatch
			detail = "the API key's checksum does not match: it was mistyped, truncated or altered"
		}
		return Principal{}, res, "", &problemError{cause: err, problem: a.problemMalformed("invalid_token", detail)}
	}
	env := k.Environment()
	p, err := a.resolver.Resolve(r.Context(), k)
	switch {
	case err == nil:
		if !p.Valid() || p.Environment != env {
			// A resolver that answers for another environment than the key's would mix data.
			return Principal{}, OutcomeEnvironmentMismatch, env, &problemError{cause: errors.New("apikey: resolver returned a principal that does not match the key"),
				problem: apierror.Internal()}
		}
		return p, OutcomeAuthenticated, env, nil
	case errors.Is(err, ErrUnknown), errors.Is(err, ErrExpired), errors.Is(err, ErrRevoked):
		res := OutcomeUnknownKey
		if errors.Is(err, ErrExpired) {
			res = OutcomeExpired
		} else if errors.Is(err, ErrRevoked) {
			res = OutcomeRevoked
		}
		return Principal{}, res, env, &problemError{cause: err, problem: a.problemInvalid()}
	default:
		return Principal{}, OutcomeUnavailable, env, &problemError{cause: err, problem: apierror.Unavailable(a.retryAfter, CodeUnavailable,
			"credentials could not be checked just now; retry after the number of seconds in Retry-After")}
	}
}

// bearerToken extracts the token of a single "Bearer <token>" header (the scheme is case-insensitive,
// RFC 9110 §11.1).
func (a *Authenticator) bearerToken(h http.Header) (string, error) {
	token, err := bearerToken(h)
	var pe *problemError
	if errors.As(err, &pe) {
		switch {
		case errors.Is(err, ErrNoCredentials):
			pe.problem = a.problemMissing()
		case errors.Is(err, ErrAuthScheme):
			pe.problem = a.problemScheme()
		default:
			pe.problem = a.problemMalformed("invalid_request", pe.problem.Detail)
		}
	}
	return token, err
}

// bearerToken is the header parsing of Authenticator.bearerToken; its problems are placeholders that
// carry the detail for the Authenticator's own.
func bearerToken(h http.Header) (string, error) {
	vals := h.Values(HeaderAuthorization)
	if len(vals) == 0 || (len(vals) == 1 && strings.TrimSpace(vals[0]) == "") {
		return "", &problemError{cause: ErrNoCredentials, problem: &apierror.Error{}}
	}
	if len(vals) > 1 {
		return "", &problemError{cause: ErrNotBearer, problem: &apierror.Error{Detail: "send exactly one Authorization header"}}
	}
	v := strings.TrimSpace(vals[0])
	scheme, token, ok := strings.Cut(v, " ")
	token = strings.TrimLeft(token, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", &problemError{cause: ErrAuthScheme, problem: &apierror.Error{}}
	}
	if !ok || token == "" || strings.ContainsAny(token, " \t") {
		return "", &problemError{cause: ErrNotBearer, problem: &apierror.Error{Detail: "must be Bearer followed by a space and an API key"}}
	}
	return token, nil
}

// Handler returns middleware that authenticates every request before next runs, and answers with a
// problem instead when authentication fails.
func (a *Authenticator) Handler(next http.Handler) http.Handler {
	if a == nil || a.resolver == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { apierror.Write(w, r, errZeroAuthenticator) })
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r)
		if err != nil {
			a.logRefusal(r, err)
			a.writer.Write(w, r, err)
			return
		}
		if n := reqnote.From(r.Context()); n != nil {
			n.SetPrincipal(p.KeyID, p.Scope(), string(p.Environment))
		}
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), p)))
	})
}

func (a *Authenticator) logRefusal(r *http.Request, err error) {
	if a.log == nil {
		return
	}
	var p *apierror.Error
	if errors.As(err, &p) && p.Status >= 500 {
		a.log.ErrorContext(r.Context(), "apikey: authentication failed", "request_id", apierror.RequestIDFromContext(r.Context()), "error", apierror.Redact(err.Error()))
		return
	}
	attrs := []any{"request_id", apierror.RequestIDFromContext(r.Context()), "reason", apierror.Redact(err.Error())}
	// Only a well-formed key is logged, redacted: a malformed "key" may be some other secret pasted by
	// mistake, and none of it belongs in a log.
	if tok, tErr := bearerToken(r.Header); tErr == nil {
		if k, kErr := Parse(tok); kErr == nil {
			attrs = append(attrs, "key", k)
		}
	}
	a.log.InfoContext(r.Context(), "apikey: credentials refused", attrs...)
}
