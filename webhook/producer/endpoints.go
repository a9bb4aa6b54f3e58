package producer

import "github.com/svcplatform/conventions/webhook/producer/driver"

// Endpoint is a registered webhook endpoint: where its events go, how they are signed and whose they
// are (driver.Endpoint, where the registries that store it are specified).
type Endpoint = driver.Endpoint

// Errors of endpoint registries, for errors.Is.
var (
	// ErrUnknownEndpoint: no endpoint has that ID.
	ErrUnknownEndpoint = driver.ErrUnknownEndpoint
	// ErrInvalidEndpoint: a registration lacks an ID, owner, secret or usable URL, or a setting is
	// out of bounds.
	ErrInvalidEndpoint = driver.ErrInvalidEndpoint
	// ErrEndpointLimit: the owner already has as many endpoints as a registration's limit allows.
	ErrEndpointLimit = driver.ErrEndpointLimit
)
