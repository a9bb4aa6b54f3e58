package driver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/svcplatform/conventions/webhook/producer/internal/epcheck"
)

// Endpoint is a registered webhook endpoint: where its events go, how they are signed, whose they
// are, which of them it receives and whether it receives any now. Its ID names its stream in the Log.
// It is a plain value; registries copy its slices and maps on the way in and out. The zero value is
// not a valid registration (see Validate).
//
// Its lifecycle: an endpoint is enabled when registered; disabling it (DisabledReason) stops its
// deliveries while its events are still appended and numbered, so that the first delivery after it
// is enabled again shows the consumer the gap to fetch by range; deleting it (DeletedAt) stops its
// events and deliveries for good while its stream stays readable by range until the retention removes
// it. Registries that implement EndpointEditor change endpoints this way, atomically.
type Endpoint struct {
	// ID identifies the endpoint ("we_…") and its event stream.
	ID string
	// URL receives the deliveries by POST.
	URL string
	// Secrets sign deliveries and range responses, the newest first. Normally one; two while a secret
	// rolls, and then every signature carries one v1 per secret, so that the consumer can switch at
	// its own pace (see OldSecretsExpire).
	Secrets []string
	// OldSecretsExpire, when not zero, is when every secret but the first stops signing: the end of a
	// secret roll's overlap (see SigningSecrets). Zero means every secret signs until the registry is
	// told otherwise.
	OldSecretsExpire time.Time
	// Owner is the licensee the endpoint belongs to. Range retrieval answers only its owner.
	Owner string
	// APIVersion is the API version events are rendered at for this endpoint, through the Render
	// hook: by default its licensee's pin when it was registered, and changed apart from the pin so
	// that a consumer can upgrade its webhook handler apart from its API calls. Empty means events go
	// out as they were stored.
	APIVersion string
	// EnabledEvents lists the event types the endpoint receives; empty, or "*" alone, means every
	// type (see Subscribed). An event of another type takes no place in its stream.
	EnabledEvents []string
	// Description is the owner's note on the endpoint: at most MaxDescriptionBytes of UTF-8.
	Description string
	// Metadata holds the owner's own key-value pairs: at most MaxMetadataPairs, keys of 1 to 40 bytes,
	// values of at most 500, UTF-8.
	Metadata map[string]string
	// Headers are added to every delivery request: at most MaxHeaders, MaxHeadersBytes of names and
	// values in all. No name may be one the producer sets (X-SVC-*, Content-*, User-Agent, trace
	// context), a hop-by-hop or Host header, or a credential (Authorization, Proxy-Authorization,
	// Cookie): settings are shown to whoever reads the endpoint, and the signature is what
	// authenticates a delivery.
	Headers map[string]string
	// Created is when the endpoint was registered; zero when the registrar did not say.
	Created time.Time
	// DisabledReason, when not empty, says why the endpoint is disabled ("manual", or a reason of the
	// delivery-health checks) and stops its deliveries; DisabledAt is then when. Both are empty for
	// an enabled endpoint.
	DisabledReason string
	DisabledAt     time.Time
	// RateLimit, when not 0, is the most deliveries the endpoint receives per second (at least 1, at
	// most MaxRateLimit): the Dispatcher spaces its requests 1/RateLimit seconds apart, across
	// replicas, by scheduling the next one rather than waiting for it. 0 means unthrottled.
	RateLimit int
	// FailingSince, when not zero, is when the endpoint's deliveries started failing: the first failed
	// attempt since its last success. The Dispatcher sets and clears it as attempts fail and succeed,
	// and disables the endpoint ("failing") once it has failed for DispatcherOptions.DisableAfter;
	// enabling an endpoint clears it.
	FailingSince time.Time
	// DeletedAt, when not zero, is when the endpoint was deleted: it is listed nowhere, receives no
	// event and no delivery, and cannot change any more; Lookup still returns it, so that range
	// retrieval serves (and signs) its stream to its owner until the retention removes it.
	DeletedAt time.Time
}

// Bounds of an endpoint's settings, which Validate enforces.
const (
	MaxDescriptionBytes = epcheck.MaxDescriptionBytes
	MaxMetadataPairs    = epcheck.MaxMetadataPairs
	MaxHeaders          = epcheck.MaxHeaders
	MaxHeadersBytes     = epcheck.MaxHeadersBytes
	MaxRateLimit        = epcheck.MaxRateLimit
)

// Subscribed reports whether the endpoint receives events of the given type: EnabledEvents is empty,
// is "*" alone, or lists the type.
func (e Endpoint) Subscribed(eventType string) bool {
	return len(e.EnabledEvents) == 0 || slices.Contains(e.EnabledEvents, epcheck.Wildcard) ||
		slices.Contains(e.EnabledEvents, eventType)
}

// SigningSecrets returns the secrets that sign at now: all of Secrets, or the first alone once
// OldSecretsExpire has come. The result shares Secrets' array.
func (e Endpoint) SigningSecrets(now time.Time) []string {
	if len(e.Secrets) > 1 && !e.OldSecretsExpire.IsZero() && !now.Before(e.OldSecretsExpire) {
		return e.Secrets[:1]
	}
	return e.Secrets
}

// Validate reports what is wrong with an endpoint's registration, without echoing its secrets or
// any other value.
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
	var problems []epcheck.Problem
	problems = append(problems, epcheck.Description(e.Description)...)
	problems = append(problems, epcheck.Metadata(e.Metadata)...)
	problems = append(problems, epcheck.Headers(e.Headers)...)
	problems = append(problems, epcheck.EnabledEvents(e.EnabledEvents, nil)...)
	problems = append(problems, epcheck.Disabled(e.DisabledReason, e.DisabledAt.IsZero())...)
	problems = append(problems, epcheck.RateLimit(e.RateLimit)...)
	if len(problems) > 0 {
		msgs := make([]string, len(problems))
		for i, p := range problems {
			msgs[i] = p.String()
		}
		return fmt.Errorf("%w: %s: %s", ErrInvalidEndpoint, e.ID, strings.Join(msgs, "; "))
	}
	return nil
}

// Clone returns a copy of e that shares no slice or map with it.
func (e Endpoint) Clone() Endpoint {
	e.Secrets = slices.Clone(e.Secrets)
	e.EnabledEvents = slices.Clone(e.EnabledEvents)
	e.Metadata = maps.Clone(e.Metadata)
	e.Headers = maps.Clone(e.Headers)
	return e
}

// Endpoints looks up registered webhook endpoints. Implementations must be safe for concurrent use.
// A registry that can also list a licensee's endpoints implements EndpointLister.
type Endpoints interface {
	// Lookup returns the endpoint with the given ID, or an error wrapping ErrUnknownEndpoint. A
	// deleted endpoint is returned, with its DeletedAt, until it is removed from the registry: range
	// retrieval still serves its stream.
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
	// in ascending byte order of ID, at most q.Limit of them, and whether more follow. Deleted
	// endpoints (DeletedAt set) are not listed. An owner without endpoints is an empty list, not an
	// error. The caller guarantees a q.Owner and a q.Limit of at least 1.
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

// EndpointEditor is implemented by registries that register endpoints under a per-owner limit and
// change them in place, atomically: memstore.Endpoints and pgstore.EndpointStore. The endpoint
// lifecycle — update, disable, enable, delete, secret roll — is built on it; drivertest.RunEndpoints
// checks it with the rest of a registry. Implementations must be safe for concurrent use, and on a
// shared database across replicas.
type EndpointEditor interface {
	// CreateEndpoint registers ep under an ID not registered yet (else ErrInvalidEndpoint). With
	// limit > 0 it fails with ErrEndpointLimit, registering nothing, when ep.Owner already has limit
	// endpoints not deleted; the count and the insert are one atomic step, also between replicas, so
	// racing registrations never take an owner past the limit.
	CreateEndpoint(ctx context.Context, ep Endpoint, limit int) error

	// UpdateEndpoint changes the endpoint with the given ID atomically: it reads it, calls change
	// with a copy, and stores what change leaves once it is valid (Endpoint.Validate). Updates of one
	// endpoint are serialised, also between replicas: each change sees what the one before stored.
	// It returns the endpoint as stored. An unknown ID, or a deleted endpoint, is ErrUnknownEndpoint
	// and change is not called. When change returns an error, nothing is stored and UpdateEndpoint
	// returns that error. change may not alter the ID or the Owner (ErrInvalidEndpoint); setting
	// DeletedAt deletes the endpoint for good. change must not block: a registry may hold a lock or a
	// row lock while it runs, and may call it more than once (then only the last call's result is
	// stored).
	UpdateEndpoint(ctx context.Context, id string, change func(*Endpoint) error) (Endpoint, error)
}

var (
	// ErrEndpointLimit: the owner already has as many endpoints as CreateEndpoint's limit allows;
	// nothing was registered.
	ErrEndpointLimit = errors.New("producer: webhook endpoint limit reached")
	// ErrUnknownEndpoint: no endpoint has that ID.
	ErrUnknownEndpoint = errors.New("producer: unknown webhook endpoint")
	// ErrInvalidEndpoint: a registration lacks an ID, owner, secret or usable URL, or a setting is
	// out of bounds.
	ErrInvalidEndpoint = errors.New("producer: invalid webhook endpoint")
)
