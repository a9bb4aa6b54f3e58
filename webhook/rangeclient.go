package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/svcplatform/conventions/apierror"
)

// Limits of the range endpoint (docs/decisions.md D3): limit defaults to 100 and may not exceed 1000.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// Byte budgets of a RangeClient, so that a huge or hostile producer cannot balloon a consumer.
const (
	// DefaultMaxResponseBytes caps one range response when RangeClientOptions.MaxResponseBytes is zero.
	DefaultMaxResponseBytes = 4 << 20
	// DefaultMaxFetchBytes caps the responses of one FetchRange call together when
	// RangeClientOptions.MaxFetchBytes is zero.
	DefaultMaxFetchBytes = 8 << 20
)

// Errors of the RangeClient.
var (
	// ErrRangeResponse: the range endpoint answered with something that is not a valid page: not 2xx
	// and not a problem, an unsigned or badly signed body, a body that is not an event list, events
	// outside the range or out of order, or a page that makes no progress.
	ErrRangeResponse = errors.New("webhook: invalid range response")
	// ErrRangeTooLarge: a response, or the responses of one FetchRange call together, exceed the
	// client's byte budget. The body is not read past the budget. It wraps ErrRangeResponse; a Tracker
	// answers it by asking for fewer events at a time.
	ErrRangeTooLarge = fmt.Errorf("%w: over the byte budget", ErrRangeResponse)
	// ErrNoAPIKey: NewRangeClient was given no API key.
	ErrNoAPIKey = errors.New("webhook: RangeClient needs an API key")
)

// RangeClientOptions tune a RangeClient. A nil *RangeClientOptions and the zero value mean the
// defaults.
type RangeClientOptions struct {
	// HTTPClient sends the requests; nil means a client with a 30-second timeout (never
	// http.DefaultClient, which has none).
	HTTPClient *http.Client
	// PageSize is the limit asked per request; zero means DefaultPageSize, above MaxPageSize is an error.
	PageSize int
	// MaxResponseBytes caps one response body; zero means DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// MaxFetchBytes caps the response bodies of one FetchRange call together; zero means
	// DefaultMaxFetchBytes. Together with MaxResponseBytes it bounds what a fetch holds in memory:
	// about twice the bodies (the bodies and the decoded events).
	MaxFetchBytes int64
	// APIVersion is the API version the consumer's licensee is pinned to, the path's first segment
	// ("v2" asks GET {base}/v2/webhook_endpoints/{id}/events); empty means DefaultAPIVersion. Set it to
	// your pin: the producer refuses a licensee on another version than its pin, and renders the
	// fetched events at the pinned version, exactly as they were delivered.
	APIVersion string
	// Hooks are told of each FetchRange call (RangeFetchStart, RangeFetchEnd with its result, size
	// and duration) and writes the fetch's trace context into each request's headers (InjectTrace);
	// nil means none. The responses' verifications are reported by the Verifier's own hooks.
	Hooks *Hooks
}

// DefaultAPIVersion is the version a RangeClient asks under when RangeClientOptions.APIVersion is empty.
const DefaultAPIVersion = "v1"

// validAPIVersion reports whether v is a version path segment: "v" and a number without a leading zero.
func validAPIVersion(v string) bool {
	if len(v) < 2 || v[0] != 'v' || v[1] == '0' {
		return false
	}
	for i := 1; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return len(v) <= 10
}

// RangeClient fetches a stream's events from the producer's range endpoint, under the API version
// the consumer is pinned to (RangeClientOptions.APIVersion, v1 by default),
//
//	GET {base}/{version}/webhook_endpoints/{id}/events?from=<n>&to=<n>&limit=<n>
//	Authorization: Bearer <api key>
//
// following pages until has_more is false. Every response body must carry a valid X-SVC-Signature,
// checked with the same Verifier as deliveries, so fetched events are as authentic as delivered ones.
// A failed request is returned as an error wrapping the producer's *apierror.Error (errors.As).
// It implements RangeFetcher for the stream's endpoint ID. A RangeClient is safe for concurrent use;
// the zero value is not usable: its FetchRange returns an error that wraps ErrNotBuilt. Build one
// with NewRangeClient.
type RangeClient struct {
	base     string
	version  string
	auth     string
	verifier *Verifier
	client   *http.Client
	pageSize int
	maxBytes int64
	maxFetch int64
	hooks    *Hooks
}

var _ RangeFetcher = (*RangeClient)(nil)

// NewRangeClient returns a client for the producer at baseURL (scheme and host, optionally a path
// prefix, no query), authenticating with apiKey and verifying responses with v.
func NewRangeClient(baseURL, apiKey string, v *Verifier, opts *RangeClientOptions) (*RangeClient, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("webhook: RangeClient needs an absolute http(s) base URL without query")
	}
	if apiKey == "" {
		return nil, ErrNoAPIKey
	}
	if v == nil || len(v.keys) == 0 {
		return nil, fmt.Errorf("%w: RangeClient needs a Verifier from NewVerifier", ErrNoSecret)
	}
	c := &RangeClient{
		base:     strings.TrimRight(u.String(), "/"),
		version:  DefaultAPIVersion,
		auth:     "Bearer " + apiKey,
		verifier: v,
		client:   &http.Client{Timeout: 30 * time.Second},
		pageSize: DefaultPageSize,
		maxBytes: DefaultMaxResponseBytes,
		maxFetch: DefaultMaxFetchBytes,
	}
	if opts != nil {
		if opts.PageSize < 0 || opts.PageSize > MaxPageSize {
			return nil, fmt.Errorf("webhook: PageSize must be from 1 to %d", MaxPageSize)
		}
		if opts.MaxResponseBytes < 0 || opts.MaxFetchBytes < 0 {
			return nil, errors.New("webhook: negative MaxResponseBytes or MaxFetchBytes")
		}
		if opts.MaxFetchBytes > 0 {
			c.maxFetch = opts.MaxFetchBytes
		}
		if opts.PageSize > 0 {
			c.pageSize = opts.PageSize
		}
		if opts.MaxResponseBytes > 0 {
			c.maxBytes = opts.MaxResponseBytes
		}
		if opts.HTTPClient != nil {
			c.client = opts.HTTPClient
		}
		c.hooks = opts.Hooks
		if opts.APIVersion != "" {
			if !validAPIVersion(opts.APIVersion) {
				return nil, fmt.Errorf("webhook: APIVersion %q is not a version such as v1 or v2", opts.APIVersion)
			}
			c.version = opts.APIVersion
		}
	}
	return c, nil
}

// FetchRange returns stream's events from..to (inclusive, ascending), fewer only when the producer has
// no more. It checks every page: signed, an event list, contiguous from where the previous page ended,
// within the range, and for this endpoint. Responses past MaxResponseBytes, or together past
// MaxFetchBytes, fail with ErrRangeTooLarge without being read further.
func (c *RangeClient) FetchRange(ctx context.Context, stream string, from, to uint64) ([]Event, error) {
	if c == nil || c.verifier == nil {
		return nil, errZeroRangeClient
	}
	if stream == "" || from == 0 || to < from || to > MaxSequence {
		return nil, errors.New("webhook: FetchRange needs a stream and 1 ≤ from ≤ to ≤ MaxSequence")
	}
	if o := c.hooks; o != nil {
		start := c.verifier.now()
		ctx = o.rangeFetchStart(ctx, RangeFetchStartInfo{Stream: stream, From: from, To: to})
		var st fetchStats
		evs, err := c.fetchRange(ctx, stream, from, to, &st)
		o.rangeFetchEnd(ctx, RangeFetchEndInfo{Stream: stream, Result: rangeFetchResultOf(ctx, err), Status: st.status,
			Events: len(evs), Pages: st.pages, Bytes: st.bytes, Duration: c.verifier.now().Sub(start)})
		return evs, err
	}
	return c.fetchRange(ctx, stream, from, to, nil)
}

// fetchStats is what a fetch reports to the observer.
type fetchStats struct {
	status, pages int
	bytes         int64
}

// fetchRange is FetchRange after its arguments were checked; st, when not nil, counts the requests.
func (c *RangeClient) fetchRange(ctx context.Context, stream string, from, to uint64, st *fetchStats) ([]Event, error) {
	var out []Event
	if n := to - from + 1; n <= MaxPageSize {
		out = make([]Event, 0, n)
	}
	budget := c.maxFetch
	for next := from; next <= to; {
		page, n, err := c.page(ctx, stream, next, to, min(c.maxBytes, budget), st)
		budget -= n
		if err != nil {
			return nil, err
		}
		for i := range page.Data {
			if page.Data[i].Sequence != next+uint64(i) || page.Data[i].Sequence > to {
				return nil, fmt.Errorf("%w: stream %q: expected sequence %d, got %d",
					ErrRangeResponse, stream, next+uint64(i), page.Data[i].Sequence)
			}
			if e := page.Data[i].Endpoint; e != "" && e != stream {
				return nil, fmt.Errorf("%w: stream %q: event %d is signed for another endpoint",
					ErrRangeResponse, stream, page.Data[i].Sequence)
			}
		}
		out = append(out, page.Data...)
		if !page.HasMore {
			break
		}
		if len(page.Data) == 0 {
			return nil, fmt.Errorf("%w: stream %q: empty page with has_more", ErrRangeResponse, stream)
		}
		next += uint64(len(page.Data))
	}
	return out, nil
}

// page fetches one page whose body may be at most limit bytes, and returns it with the body's size.
func (c *RangeClient) page(ctx context.Context, stream string, from, to uint64, limit int64, st *fetchStats) (*EventList, int64, error) {
	q := make(url.Values, 3)
	q.Set("from", strconv.FormatUint(from, 10))
	q.Set("to", strconv.FormatUint(to, 10))
	q.Set("limit", strconv.Itoa(c.pageSize))
	target := c.base + "/" + c.version + "/webhook_endpoints/" + url.PathEscape(stream) + "/events?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("webhook: range request: %w", err)
	}
	if o := c.hooks; o != nil {
		// Before Authorization is set: the carrier hides it anyway, but this way it is not even there.
		o.injectTrace(ctx, TraceCarrier{req.Header})
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Accept", "application/json")
	if st != nil {
		st.pages++
	}
	resp, err := c.client.Do(req)
	if err != nil {
		// *url.Error names the URL (no secret in it) and never the Authorization header.
		return nil, 0, fmt.Errorf("webhook: range request for stream %q: %w", stream, err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // lets the connection be reused
		_ = resp.Body.Close()
	}()
	if st != nil {
		st.status = resp.StatusCode
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		p, perr := apierror.Parse(resp)
		if perr != nil {
			return nil, 0, fmt.Errorf("%w: stream %q: status %d: %w", ErrRangeResponse, stream, resp.StatusCode, perr)
		}
		return nil, 0, fmt.Errorf("webhook: range request for stream %q: %w", stream, p)
	}
	if resp.ContentLength > limit {
		return nil, 0, fmt.Errorf("%w: stream %q: body over %d bytes", ErrRangeTooLarge, stream, limit)
	}
	body, err := readLimited(resp.Body, resp.ContentLength, limit)
	if st != nil {
		st.bytes += int64(len(body))
	}
	if err != nil {
		return nil, 0, fmt.Errorf("webhook: reading range response for stream %q: %w", stream, err)
	}
	if int64(len(body)) > limit {
		return nil, 0, fmt.Errorf("%w: stream %q: body over %d bytes", ErrRangeTooLarge, stream, limit)
	}
	if _, err := c.verifier.check(ctx, true /* a range response */, resp.Header.Get(HeaderSignature), body); err != nil {
		return nil, 0, fmt.Errorf("%w: stream %q: %w", ErrRangeResponse, stream, err)
	}
	var wire struct {
		Object  string     `json:"object"`
		Data    []envelope `json:"data"`
		HasMore bool       `json:"has_more"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		return nil, 0, fmt.Errorf("%w: stream %q: body is not an event list: %w", ErrRangeResponse, stream, err)
	}
	if wire.Object != "list" {
		return nil, 0, fmt.Errorf("%w: stream %q: object is not \"list\"", ErrRangeResponse, stream)
	}
	list := EventList{Object: wire.Object, Data: make([]Event, len(wire.Data)), HasMore: wire.HasMore}
	for i := range wire.Data {
		if o := wire.Data[i].Object; o != "" && o != ObjectEvent {
			return nil, 0, fmt.Errorf("%w: stream %q: data[%d] is not an event", ErrRangeResponse, stream, i)
		}
		list.Data[i] = Event(wire.Data[i].plain)
	}
	if len(list.Data) > c.pageSize {
		return nil, 0, fmt.Errorf("%w: stream %q: %d events in a page of %d", ErrRangeResponse, stream, len(list.Data), c.pageSize)
	}
	return &list, int64(len(body)), nil
}

// readLimited reads r to its end, or to one byte past limit, into a buffer sized from the declared
// length when there is one, else grown by doubling but never past limit+1: a hostile body costs at
// most that, garbage included.
func readLimited(r io.Reader, declared, limit int64) ([]byte, error) {
	size := int64(32 << 10)
	if declared >= 0 {
		size = declared + 1
	}
	buf := make([]byte, 0, min(size, limit+1))
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return buf, nil
			}
			grown := make([]byte, len(buf), min(2*int64(cap(buf))+1, limit+1))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
