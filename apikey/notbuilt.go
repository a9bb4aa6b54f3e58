package apikey

import "errors"

// ErrNotBuilt: an Authenticator, an Issuer or a KeysHandler used without its constructor. The errors their methods
// return match it with errors.Is and name the type; the Authenticator's Handler answers the opaque
// 500.
var ErrNotBuilt = errors.New("apikey: not built with its constructor")

// notBuiltError is ErrNotBuilt for one type: its message names the type and its constructor.
type notBuiltError struct{ msg string }

func (e *notBuiltError) Error() string        { return e.msg }
func (e *notBuiltError) Is(target error) bool { return target == ErrNotBuilt }

var (
	errZeroAuthenticator error = &notBuiltError{"apikey: Authenticator not built with NewAuthenticator"}
	errZeroIssuer        error = &notBuiltError{"apikey: Issuer not built with NewIssuer"}
	errZeroKeysHandler   error = &notBuiltError{"apikey: KeysHandler not built with NewKeysHandler"}
)
