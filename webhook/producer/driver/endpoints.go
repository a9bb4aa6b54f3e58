package driver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
)

// Endpoint is a registered webhook endpoint: where its events go, how they are signed and whose
// they are. Its ID names its stream in the Log. It is a plain value; registries copy its Secrets on the way in
// and out. The zero value is not a valid registration (see Validate).
type Endpoint struct {
	// ID identifies the endpoint ("we_…") and its event stream.
	ID string
	// URL receives the deliveries by POST.
	URL string
	// Secrets sign deliveries and range responses. Normally one; two while a secret rotates, and then
	// every signature carries one v1 per secret so the consumer can switch at its own pace.
	Secrets []string
	// Owner is the licensee the endpoint belongs to. Range retrieval answers only its owner.
	Owner string
	// APIVersion is the API version the endpoint's licensee is pinned to; events are rendered at it
	// through the Render hook. Empty means events go out as they were stored.
	APIVersion string
}

// Validate reports what is wrong with an endpoint's registration, without echoing its secrets.
func (e Endpoint) Validate() error {
	switch {
	case e.ID == "":
		return fmt.Errorf("%w: empty ID", ErrInvalidEndpoint)
	case e.Owner == "":
		return fmt.Errorf("%w: %s has no owner", ErrInvalidEndpoint, e.ID)
	case len(e.Secrets) == 0:
		return fmt.Errorf("%w: %s has no signing secret", ErrInvalidEndpoint, e.ID)
	case slices.Contains(e.Secrets, ""):
		return fmt.Errorf("%w: %s has an empty signing secret", ErrInvalidEndpoint, e.ID)
	}
	u, err := url.Parse(e.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%w: %s needs an absolute http or https URL", ErrInvalidEndpoint, e.ID)
	}
	return nil
}

// Endpoints looks up registered webhook endpoints. Implementations must be safe for concurrent use.
// A registry that can also list a licensee's endpoints implements EndpointLister.
type Endpoints interface {
	// Lookup returns the endpoint with the given ID, or an error wrapping ErrUnknownEndpoint.
	Lookup(ctx context.Context, id string) (Endpoint, error)
}

// EndpointLister is implemented by Endpoints registries that can list the endpoints of one owner
// (licensee): memstore.Endpoints and pgstore.EndpointStore. Publisher.PublishToOwner needs it, so that no
// team keeps an owner index of its own beside the registry. It is an interface of its own, not a
// method of Endpoints, so that registries that only look up keep implementing Endpoints.
// Implementations must be safe for concurrent use; drivertest.RunEndpoints is their conformance
// suite.
type EndpointLister interface {
	// ListEndpoints returns the endpoints whose Owner is q.Owner and whose ID sorts after q.After,
	// in ascending byte order of ID, at most q.Limit of them, and whether more follow. An owner
	// without endpoints is an empty list, not an error. The caller guarantees a q.Owner and a
	// q.Limit of at least 1.
	ListEndpoints(ctx context.Context, q EndpointQuery) ([]Endpoint, bool, error)
}

// EndpointQuery selects one owner's endpoints for EndpointLister.ListEndpoints. It is a plain value;
// the zero value (no owner, no limit) is never passed (the producer checks every query first).
type EndpointQuery struct {
	// Owner is the licensee whose endpoints are listed.
	Owner string
	// After, when not empty, keeps the endpoints whose ID sorts after it (byte order): the cursor of
	// the next page, the last ID of the previous one.
	After string
	// Limit is the most endpoints returned.
	Limit int
}

var (
	// ErrUnknownEndpoint: no endpoint has that ID.
	ErrUnknownEndpoint = errors.New("producer: unknown webhook endpoint")
	// ErrInvalidEndpoint: a registration lacks an ID, owner, secret or usable URL.
	ErrInvalidEndpoint = errors.New("producer: invalid webhook endpoint")
)
