package sandbox

import "errors"

// ErrNotBuilt: an Authenticator, RateLimit, TokenBucket, Controls, Issuer or FaultTransport
// used without its constructor. The errors their methods return match it with errors.Is and name the
// type; the middlewares and handlers answer the opaque 500.
var ErrNotBuilt = errors.New("sandbox: not built with its constructor")

// notBuiltError is ErrNotBuilt for one type: its message names the type and its constructor.
type notBuiltError struct{ msg string }

func (e *notBuiltError) Error() string        { return e.msg }
func (e *notBuiltError) Is(target error) bool { return target == ErrNotBuilt }

var (
	errZeroAuthenticator  error = &notBuiltError{"sandbox: Authenticator not built with NewAuthenticator"}
	errZeroControls       error = &notBuiltError{"sandbox: Controls not built with NewControls"}
	errZeroFaultTransport error = &notBuiltError{"sandbox: FaultTransport not built with NewFaultTransport"}
	errZeroIssuer         error = &notBuiltError{"sandbox: Issuer not built with NewIssuer"}
	errZeroRateLimit      error = &notBuiltError{"sandbox: RateLimit not built with NewRateLimit"}
	errZeroTokenBucket    error = &notBuiltError{"sandbox: TokenBucket not built with NewTokenBucket"}
)
