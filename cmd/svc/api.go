package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
)

// maxResponse bounds what svc reads of an answer (range pages have their own, larger bound).
const maxResponse = 4 << 20

// requestTimeout bounds one command's request, its retries included.
const requestTimeout = 60 * time.Second

// client speaks the API's conventions: Bearer authentication, the version segment, an
// Idempotency-Key on every mutating request (retried on the same key by idempotency.Transport), and
// problems read back as located errors.
type client struct {
	base, version, token string
	http                 *http.Client
}

func newClient(cfg *config, token string) *client {
	return &client{base: cfg.BaseURL, version: cfg.APIVersion, token: token, http: &http.Client{
		// Network errors, 409 (the first attempt still running) and 5xx are retried with the same key,
		// so a command run once creates at most one thing, however the network behaves.
		Transport: &idempotency.Transport{Base: baseTransport(), MaxAttempts: 4, MaxBackoff: 2 * time.Second},
		// The API never redirects; following one would send the key to wherever it points.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// baseTransport is a transport of svc's own (never http.DefaultTransport's shared state), with the
// proxy settings of the environment.
func baseTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 30 * time.Second
	return t
}

// response is a successful answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends method path (below the version segment: "/orders") with body as JSON (nil for none) and
// key as the Idempotency-Key of a mutating request ("" lets the transport make one). An answer that
// is not 2xx is a *problemError.
func (c *client) do(ctx context.Context, method, path string, body any, key string) (*response, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	target := c.base + "/" + c.version + path
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("User-Agent", userAgent())
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set(idempotency.HeaderKey, key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, redactURL(target), unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return nil, readProblem(resp, method, target)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", method, redactURL(target), err)
	}
	if len(b) > maxResponse {
		return nil, fmt.Errorf("%s %s: the answer is over %d bytes", method, redactURL(target), maxResponse)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// decode reads r's body into v, strictly enough to notice a server that is not this API.
func (r *response) decode(v any) error {
	if err := json.Unmarshal(r.body, v); err != nil {
		return fmt.Errorf("the server's answer is not the expected JSON: %w", err)
	}
	return nil
}

// problemError is an answer that is not 2xx, with the problem it carried when it was one.
type problemError struct {
	method, target string
	status         int
	problem        *apierror.Error // nil when the body was not a problem
	text           string          // the start of a body that was not a problem
}

func (e *problemError) Error() string {
	var b strings.Builder
	e.print(&b)
	return strings.TrimSuffix(strings.TrimPrefix(b.String(), "svc: "), "\n")
}

// print shows the problem as a person reads it: the status and code, the detail, each located
// violation on a line of its own, and the request ID to quote to the server's operators.
func (e *problemError) print(w io.Writer) {
	fmt.Fprintf(w, "svc: %s %s: %d %s", e.method, redactURL(e.target), e.status, http.StatusText(e.status))
	p := e.problem
	if p == nil {
		if e.text != "" {
			fmt.Fprintf(w, ": %s", e.text)
		}
		fmt.Fprintln(w)
		return
	}
	if p.Code != "" {
		fmt.Fprintf(w, " (%s)", clean(p.Code))
	}
	fmt.Fprintln(w)
	lines := make([]string, len(p.Errors))
	for i, v := range p.Errors {
		where := string(v.Location)
		if v.Pointer != "" {
			where += " " + v.Pointer
		} else if v.Name != "" {
			where += " " + v.Name
		}
		lines[i] = clean(where + ": " + v.Detail)
	}
	// The detail often is the one violation in words; then the violation's own line says it all.
	if detail := clean(p.Detail); detail != "" && (len(lines) != 1 || lines[0] != detail) {
		fmt.Fprintf(w, "  %s\n", detail)
	}
	for i, v := range p.Errors {
		fmt.Fprintf(w, "  - %s (%s)\n", lines[i], clean(v.Code))
	}
	if p.RequestID != "" {
		fmt.Fprintf(w, "  request %s\n", clean(p.RequestID))
	}
	if pinned, _ := p.Extensions["pinned_version"].(string); p.Code == "version_not_enabled" && validVersion(pinned) {
		fmt.Fprintf(w, "  the key's licensee is pinned to %s: set %s=%s (or pass --api-version %s)\n", pinned, envAPIVersion, pinned, pinned)
	}
}

// retryable reports whether the answer may change if the request is sent again: a 5xx, a 429, and a
// 409 that is the Idempotency-Key's first request still running (or not a problem at all, which
// nothing vouches for). Another 409 is the server's decision about the resource's state, such as
// version_upgrade_final: sending it again changes nothing.
func (e *problemError) retryable() bool {
	switch {
	case e.status >= 500, e.status == http.StatusTooManyRequests:
		return true
	case e.status == http.StatusConflict:
		return e.problem == nil || e.problem.Code == "" || e.problem.Code == idempotency.CodeKeyInUse
	}
	return false
}

func readProblem(resp *http.Response, method, target string) error {
	pe := &problemError{method: method, target: target, status: resp.StatusCode}
	p, err := apierror.Parse(resp)
	if err == nil {
		pe.problem = p
		return pe
	}
	if errors.Is(err, apierror.ErrNotProblem) {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		// Not the API's problem — a proxy's page, say — so nothing vouches that it echoes no credential.
		pe.text = clean(apierror.Redact(strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "?")), " ")))
	}
	return pe
}

// redactURL drops a URL's query string from messages: it is the server's business, and the path
// says what was asked.
func redactURL(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[:i]
	}
	return u
}

// unwrapURLError keeps the cause of a *url.Error, whose own message repeats the URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// userAgent names svc and its module version.
func userAgent() string { return "svc/" + version() }

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

func runVersion(_ context.Context, e env, args []string) error {
	f := newFlags(e, "svc version", "", "Print svc's version: the module version it was installed at.")
	if err := f.parse(args, 0); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "svc", version())
	return nil
}
