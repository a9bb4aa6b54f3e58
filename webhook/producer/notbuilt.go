package producer

import "errors"

// ErrNotBuilt: a Publisher, Dispatcher, Sequencer, RangeHandler, DeliveriesHandler or
// EndpointsHandler used without its constructor. The errors their methods return match it with
// errors.Is and name the type; the handlers answer the opaque 500.
var ErrNotBuilt = errors.New("producer: not built with its constructor")

// notBuiltError is ErrNotBuilt for one type: its message names the type and its constructor.
type notBuiltError struct{ msg string }

func (e *notBuiltError) Error() string        { return e.msg }
func (e *notBuiltError) Is(target error) bool { return target == ErrNotBuilt }

var (
	errZeroPublisher         error = &notBuiltError{"producer: Publisher has no Log (build it with NewPublisher)"}
	errZeroDispatcher        error = &notBuiltError{"producer: Dispatcher not built with NewDispatcher"}
	errZeroSequencer         error = &notBuiltError{"producer: Sequencer not built with NewSequencer"}
	errZeroRangeHandler      error = &notBuiltError{"producer: RangeHandler not built with NewRangeHandler"}
	errZeroDeliveriesHandler error = &notBuiltError{"producer: DeliveriesHandler not built with NewDeliveriesHandler"}
	errZeroEndpointsHandler  error = &notBuiltError{"producer: EndpointsHandler not built with NewEndpointsHandler"}
)
