package apierror

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// maxProblemBytes caps how much of a problem response Parse reads.
const maxProblemBytes = 1 << 20

// ErrNotProblem is returned by Parse for a response that is not application/problem+json.
var ErrNotProblem = errors.New("apierror: response is not application/problem+json")

// Parse reads a problem response back into an *Error, for clients. It reads at most 1 MiB of the body
// and does not close it. A response whose Content-Type is not application/problem+json gives
// ErrNotProblem. The Status is taken from the response when the body omits it.
func Parse(resp *http.Response) (*Error, error) {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != MediaType {
		return nil, fmt.Errorf("%w (status %d, Content-Type %q)", ErrNotProblem, resp.StatusCode, mt)
	}
	if resp.Body == nil {
		return nil, errors.New("apierror: problem response without a body")
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes))
	if err != nil {
		return nil, fmt.Errorf("apierror: reading problem body: %w", err)
	}
	// A problem is a JSON object (RFC 9457 §3); "null" would otherwise decode as an empty one.
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		return nil, errors.New("apierror: decoding problem body: not a JSON object")
	}
	var p Error
	if err := p.UnmarshalJSON(body); err != nil {
		return nil, fmt.Errorf("apierror: decoding problem body: %w", err)
	}
	if p.Status == 0 {
		p.Status = resp.StatusCode
	}
	if p.RequestID == "" {
		p.RequestID = resp.Header.Get(HeaderRequestID)
	}
	return &p, nil
}
