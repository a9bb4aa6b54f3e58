package requestlog

import (
	"context"
	"errors"
	"time"
)

// Entry is what the log keeps of one request. It holds no body, query string, header value or
// credential: only the identifiers and outcome below, each of them either the server's own (the
// request ID, the route pattern, the version, the problem's code) or checked before it is kept (the
// method and the Idempotency-Key, which the client chooses). It is a plain value; the zero Entry
// is an empty record that no Store is given.
type Entry struct {
	// RequestID is the request's ID (apierror.RequestIDFromContext): "req_…", or an ID adopted from
	// the layer in front (apierror.RequestIDs.From). With Owner, it identifies the entry.
	RequestID string
	// Owner is who may read the entry: the scope of the principal the request was authenticated as
	// (apikey.Principal.Scope, "live:lic_42"); "" when it was not authenticated (a refused 401, say),
	// which no caller of the read API can see.
	Owner string
	// KeyID names the API key the request was authenticated with ("key_…"; never the key), or "".
	KeyID string
	// Environment is the key's environment ("live" or "sandbox"), or "".
	Environment string
	// Method is the request's method; a method that is not one of net/http's is kept as "_OTHER".
	Method string
	// Route is the pattern that routed the request ("POST /v1/orders"), never the raw path; "" when
	// no pattern was known (see Options.Route).
	Route string
	// Status is the response's status code.
	Status int
	// Code is the problem's code when the response is a problem ("api_key_invalid"), or "".
	Code string
	// IdempotencyKey is the request's Idempotency-Key as the idempotency middleware accepted it, or ""
	// (also when it was shaped like a credential: such a value is never kept).
	IdempotencyKey string
	// Replayed reports that the response was a stored one, replayed by the idempotency middleware.
	Replayed bool
	// Version is the API version the request was addressed to ("v2"), or "".
	Version string
	// Latency is how long the request took to serve, measured by the log's middleware.
	Latency time.Duration
	// At is when the request reached the log's middleware.
	At time.Time
}

// Query selects the entries of one owner for Store.List, newest first. It is a plain value; the zero
// value of each filter (every field but Owner and Limit) selects everything.
type Query struct {
	// Owner is whose entries are listed. It is never "" in a query the RequestsHandler makes.
	Owner string
	// Status, when not 0, keeps the entries with this status.
	Status int
	// StatusClass, when not 0, keeps the entries whose status is in this class: 4 keeps 4xx.
	StatusClass int
	// Code, when not "", keeps the entries with this problem code.
	Code string
	// KeyID, when not "", keeps the entries of this API key.
	KeyID string
	// Route, when not "", keeps the entries of this route pattern.
	Route string
	// Since, when not zero, keeps the entries at or after it.
	Since time.Time
	// Until, when not zero, keeps the entries before it.
	Until time.Time
	// After, when not "", is the cursor of the next page: the RequestID of the last entry of the
	// previous page. Entries come after it in the list's order (At, then RequestID, both descending).
	// An ID the store does not hold for Owner (pruned by the retention, say) gives an empty page.
	After string
	// Limit is the most entries returned; it is at least 1.
	Limit int
}

// Store keeps a request log's entries. NewMemoryStore returns the in-memory one; pgstore's
// RequestLogStore keeps them in PostgreSQL. Implementations must be safe for concurrent use, and
// pass the conformance suite in requestlog/requestlogtest.
//
// Times are kept to the microsecond: the Log truncates At and Latency to it before it stores them.
type Store interface {
	// Insert stores a batch of entries, all or none. An entry whose Owner and RequestID are those of
	// an entry already stored (in the store or earlier in the batch) is skipped: the first one
	// stays. The Log reuses the slice: Insert must not keep it after it returns.
	Insert(ctx context.Context, entries []Entry) error
	// Get returns owner's entry with the request ID, or ErrNotFound.
	Get(ctx context.Context, owner, requestID string) (Entry, error)
	// List returns the entries q selects, newest first (At, then RequestID, both descending), at most
	// q.Limit of them, and whether more follow.
	List(ctx context.Context, q Query) ([]Entry, bool, error)
	// DeleteBefore removes at most limit entries whose At is before the given instant, and returns
	// how many it removed. The Log calls it until it returns fewer than limit.
	DeleteBefore(ctx context.Context, before time.Time, limit int) (int, error)
}

// ErrNotFound: Store.Get found no entry of the owner with the request ID.
var ErrNotFound = errors.New("requestlog: no such request")
