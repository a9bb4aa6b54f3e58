package sandbox

import "errors"

// ErrNotBuilt: Controls or a FaultTransport used without its constructor. The errors their methods
// return match it with errors.Is and name the type; the Controls answer the opaque 500.
var ErrNotBuilt = errors.New("sandbox: not built with its constructor")

// notBuiltError is ErrNotBuilt for one type: its message names the type and its constructor.
type notBuiltError struct{ msg string }

func (e *notBuiltError) Error() string        { return e.msg }
func (e *notBuiltError) Is(target error) bool { return target == ErrNotBuilt }

var (
	errZeroControls       error = &notBuiltError{"sandbox: Controls not built with NewControls"}
	errZeroFaultTransport error = &notBuiltError{"sandbox: FaultTransport not built with NewFaultTransport"}
)
