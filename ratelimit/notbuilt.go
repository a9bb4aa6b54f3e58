package ratelimit

import "errors"

// ErrNotBuilt: a Middleware or a TokenBucket used without its constructor. The errors their methods
// return match it with errors.Is and name the type; the Middleware's Handler answers the opaque 500.
var ErrNotBuilt = errors.New("ratelimit: not built with its constructor")

// notBuiltError is ErrNotBuilt for one type: its message names the type and its constructor.
type notBuiltError struct{ msg string }

func (e *notBuiltError) Error() string        { return e.msg }
func (e *notBuiltError) Is(target error) bool { return target == ErrNotBuilt }

var (
	errZeroMiddleware  error = &notBuiltError{"ratelimit: Middleware not built with New"}
	errZeroTokenBucket error = &notBuiltError{"ratelimit: TokenBucket not built with NewTokenBucket"}
)
