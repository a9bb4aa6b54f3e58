package apierror

import "context"

// Observer is told about every problem a Writer writes: the telemetry hook of this package (the
// otelconv module implements it with OpenTelemetry). Set it once, on the Writer a service installs
// with Writer.Handler, and it sees every problem written below — by this library's middlewares and by
// the package-level Write — since every Writer that leaves Observer nil takes the one in the request
// context.
//
// Implementations must be safe for concurrent use, and must not block: ProblemWritten is called
// synchronously, on the request's goroutine, after the response has been handed to the
// ResponseWriter.
type Observer interface {
	// ProblemWritten reports one problem response. ctx is the request's context (context.Background
	// when Write was given no request), so an implementation can find the request's span in it.
	ProblemWritten(ctx context.Context, p WrittenProblem)
}

// WrittenProblem is what an Observer learns about one problem response: a plain value that holds no
// secret and nothing the client sent. Code and Type are chosen by the server (this library's codes and
// the service's own), never taken from the request. The zero value describes no response: every
// problem reported has a Status and a Code.
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
