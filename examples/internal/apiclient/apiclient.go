// Package apiclient is a small typed client for the reference order server, shared by the client
// example and the demo. It adds nothing to the protocol: the http.Client it is given decides how
// requests travel (the examples give it an idempotency.Transport, which retries with the same key).
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
)

// Order is an order as the server returns it, in either version: Side is v1's "side" or v2's
// "direction", whichever the body has (an order's JSON, or a webhook event's data).
type Order struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Account string `json:"account"`
	Side    string `json:"side"`
	Status  string `json:"status"`
	Created int64  `json:"created"`
}

// UnmarshalJSON reads an order of v1 ("side") or v2 ("direction").
func (o *Order) UnmarshalJSON(b []byte) error {
	type plain Order
	var w struct {
		plain
		Direction string `json:"direction"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*o = Order(w.plain)
	if o.Side == "" {
		o.Side = w.Direction
	}
	return nil
}

// Endpoint is a registered webhook endpoint, with its signing secret.
type Endpoint struct {
	ID         string `json:"id"`
	URL        string `json:"url"`
	Secret     string `json:"secret"`
	APIVersion string `json:"api_version"`
	// Status is "enabled" or "disabled"; DisabledReason says why ("manual", "failing", "gone").
	Status         string `json:"status"`
	DisabledReason string `json:"disabled_reason"`
}

// Faults are the sandbox's webhook fault rates for one endpoint.
type Faults struct {
	Drop         float64 `json:"drop"`
	Duplicate    float64 `json:"duplicate"`
	Reorder      float64 `json:"reorder"`
	BadSignature float64 `json:"bad_signature"`
	DelayMS      int64   `json:"delay_ms"`
}

// Client calls one order server with one API key, at one API version. It is safe for concurrent use.
type Client struct {
	BaseURL string
	APIKey  string
	HTTP    *http.Client
	// Version is the API version the client speaks, the paths' first segment; empty means v1. An order's
	// direction is "side" in v1 and "direction" in v2.
	Version string
}

func (c *Client) version() string {
	if c.Version == "" {
		return "v1"
	}
	return c.Version
}

// Result says how the server answered a mutating request.
type Result struct {
	// Replayed is true when the answer was the stored response of an earlier request with the same
	// Idempotency-Key: the server did not act again.
	Replayed bool
	// RequestID is the server's X-Request-Id, for support.
	RequestID string
	// Version is the X-SVC-Version the server answered at; Deprecation, Sunset and Links are the
	// lifecycle headers of a deprecated version (RFC 9745, RFC 8594), empty for a current one.
	Version, Deprecation, Sunset string
	Links                        []string
}

// CreateOrder creates an order. key is the Idempotency-Key; empty lets the transport choose one.
func (c *Client) CreateOrder(ctx context.Context, key, account, side string) (Order, Result, error) {
	var o Order
	member := "side"
	if c.version() != "v1" {
		member = "direction"
	}
	res, err := c.do(ctx, http.MethodPost, "/orders", key, map[string]string{"account": account, member: side}, http.StatusCreated, &o)
	return o, res, err
}

// GetOrder reads an order.
func (c *Client) GetOrder(ctx context.Context, id string) (Order, error) {
	var o Order
	_, err := c.do(ctx, http.MethodGet, "/orders/"+id, "", nil, http.StatusOK, &o)
	return o, err
}

// CreateEndpoint registers a webhook endpoint for url, subscribed to the given event types (every
// type when none is given).
func (c *Client) CreateEndpoint(ctx context.Context, url string, events ...string) (Endpoint, error) {
	var ep Endpoint
	body := map[string]any{"url": url}
	if len(events) > 0 {
		body["enabled_events"] = events
	}
	_, err := c.do(ctx, http.MethodPost, "/webhook_endpoints", idempotency.NewKey(), body, http.StatusCreated, &ep)
	return ep, err
}

// GetEndpoint reads a webhook endpoint (without its secret).
func (c *Client) GetEndpoint(ctx context.Context, id string) (Endpoint, error) {
	var ep Endpoint
	_, err := c.do(ctx, http.MethodGet, "/webhook_endpoints/"+id, "", nil, http.StatusOK, &ep)
	return ep, err
}

// Trigger sends a sandbox test event with data to one endpoint (POST /sandbox/events).
func (c *Client) Trigger(ctx context.Context, endpointID string, data any) error {
	_, err := c.do(ctx, http.MethodPost, "/sandbox/events", idempotency.NewKey(),
		map[string]any{"endpoint": endpointID, "data": data}, http.StatusCreated, nil)
	return err
}

// RollSecret rolls a webhook endpoint's signing secret: the answer carries the new one; the old one
// keeps signing beside it for expiresIn (0 ends it at once).
func (c *Client) RollSecret(ctx context.Context, endpointID string, expiresIn time.Duration) (Endpoint, error) {
	var ep Endpoint
	_, err := c.do(ctx, http.MethodPost, "/webhook_endpoints/"+endpointID+"/roll_secret", idempotency.NewKey(),
		map[string]int64{"expires_in": int64(expiresIn / time.Second)}, http.StatusOK, &ep)
	return ep, err
}

// SetFaults turns on webhook faults for a sandbox endpoint.
func (c *Client) SetFaults(ctx context.Context, endpointID string, f Faults) error {
	_, err := c.do(ctx, http.MethodPost, "/sandbox/webhook_endpoints/"+endpointID+"/faults", idempotency.NewKey(), f, http.StatusOK, nil)
	return err
}

// do sends one request to path under the client's version and decodes a success into out; any
// other answer is returned as the server's *apierror.Error.
func (c *Client) do(ctx context.Context, method, path, key string, in any, want int, out any) (Result, error) {
	path = "/" + c.version() + path
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return Result{}, err
		}
		body = bytes.NewReader(b) // NewRequest sets GetBody for it, so the transport can resend it
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, body)
	if err != nil {
		return Result{}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.APIKey)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set(idempotency.HeaderKey, key)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Result{}, err
	}
	defer resp.Body.Close()
	res := Result{Replayed: resp.Header.Get(idempotency.HeaderReplayed) == "true",
		RequestID: resp.Header.Get(apierror.HeaderRequestID), Version: resp.Header.Get("X-SVC-Version"),
		Deprecation: resp.Header.Get("Deprecation"), Sunset: resp.Header.Get("Sunset"),
		Links: resp.Header.Values("Link")}
	if resp.StatusCode != want {
		p, err := apierror.Parse(resp)
		if err != nil {
			return res, fmt.Errorf("apiclient: %s %s: %w", method, path, err)
		}
		return res, p
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return res, nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out); err != nil {
		return res, fmt.Errorf("apiclient: %s %s: decode response: %w", method, path, err)
	}
	return res, nil
}
