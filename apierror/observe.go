package apierror

import "context"

// Hooks are told what a Writer writes, for metrics and traces (the otelconv module fills them with
// OpenTelemetry). Set them once, in the Hooks of the Writer a service installs with Writer.Handler,
// and they see every problem written below — by this library's middlewares and by the package-level
// Write — since every Writer whose Hooks is nil takes the ones of the Writer in the request context.
//
// Every field may be nil; the zero value observes nothing, and a nil *Hooks observes nothing at no
// cost. Fields will be added as the package grows: Hooks written for an earlier version keep
// compiling and keep working, since a new field is nil in them.
//
// The hooks are called synchronously, on the request's goroutine, from many goroutines at once: they
// must be safe for concurrent use and must not block. A Hooks value must not be modified once in use.
type Hooks struct {
	// ProblemWritten is called after a problem response has been handed to the ResponseWriter. ctx
	// is the request's context (context.Background when Write was given no request), so an
	// implementation can find the request's span in it.
	ProblemWritten func(ctx context.Context, p WrittenProblem)
}

// problemWritten calls h.ProblemWritten when it is set; h may be nil.
func (h *Hooks) problemWritten(ctx context.Context, p WrittenProblem) {
	if h != nil && h.ProblemWritten != nil {
		h.ProblemWritten(ctx, p)
	}
}

// WrittenProblem is what Hooks.ProblemWritten learns about one problem response: a plain value that
// holds no secret and nothing the client sent. Code and Type are chosen by the server (this library's
// codes and the service's own), never taken from the request. The zero value describes no response:
// every problem reported has a Status and a Code.
type WrittenProblem struct {
	// Status is the HTTP status written.
	Status int
	// Code is the problem's code as written (CodeInternal for the opaque 500).
	Code string
	// Type is the problem's own type URI, "" when the Writer derived it from Code and its TypeBase.
	Type string
	// Violations is how many located violations the body lists.
	Violations int
	// Opaque reports an error that was not a problem (not an *Error, an *Error without a 4xx or 5xx
	// status, or one whose extensions could not be marshalled) and was answered with the opaque 500.
	Opaque bool
}
