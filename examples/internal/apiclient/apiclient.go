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

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
)

// Order is an order as the server returns it.
type Order struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Account string `json:"account"`
	Side    string `json:"side"`
	Status  string `json:"status"`
	Created int64  `json:"created"`
}

// Endpoint is a registered webhook endpoint, with its signing secret.
type Endpoint struct {
	ID         string `json:"id"`
	URL        string `json:"url"`
	Secret     string `json:"secret"`
	APIVersion string `json:"api_version"`
}

// Faults are the sandbox's webhook fault rates for one endpoint.
type Faults struct {
	Drop         float64 `json:"drop"`
	Duplicate    float64 `json:"duplicate"`
	Reorder      float64 `json:"reorder"`
	BadSignature float64 `json:"bad_signature"`
	DelayMS      int64   `json:"delay_ms"`
}

// Client calls one order server with one API key. It is safe for concurrent use.
type Client struct {
	BaseURL string
	APIKey  string
	HTTP    *http.Client
}

// Result says how the server answered a mutating request.
type Result struct {
	// Replayed is true when the answer was the stored response of an earlier request with the same
	// Idempotency-Key: the server did not act again.
	Replayed bool
	// RequestID is the server's X-Request-Id, for support.
	RequestID string
}

// CreateOrder creates an order. key is the Idempotency-Key; empty lets the transport choose one.
func (c *Client) CreateOrder(ctx context.Context, key, account, side string) (Order, Result, error) {
	var o Order
	res, err := c.do(ctx, http.MethodPost, "/v1/orders", key, map[string]string{"account": account, "side": side}, http.StatusCreated, &o)
	return o, res, err
}

// GetOrder reads an order.
func (c *Client) GetOrder(ctx context.Context, id string) (Order, error) {
	var o Order
	_, err := c.do(ctx, http.MethodGet, "/v1/orders/"+id, "", nil, http.StatusOK, &o)
	return o, err
}

// CreateEndpoint registers a webhook endpoint for url.
func (c *Client) CreateEndpoint(ctx context.Context, url string) (Endpoint, error) {
	var ep Endpoint
	_, err := c.do(ctx, http.MethodPost, "/v1/webhook_endpoints", idempotency.NewKey(), map[string]string{"url": url}, http.StatusCreated, &ep)
	return ep, err
}

// SetFaults turns on webhook faults for a sandbox endpoint.
func (c *Client) SetFaults(ctx context.Context, endpointID string, f Faults) error {
	_, err := c.do(ctx, http.MethodPost, "/v1/sandbox/webhook_endpoints/"+endpointID+"/faults", idempotency.NewKey(), f, http.StatusOK, nil)
	return err
}

// do sends one request and decodes a success into out; any other answer is returned as the
// server's *apierror.Error.
func (c *Client) do(ctx context.Context, method, path, key string, in any, want int, out any) (Result, error) {
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
		RequestID: resp.Header.Get(apierror.HeaderRequestID)}
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
