package portal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/idempotency"
)

// maxAPIBody bounds what the portal reads of one API answer: a range page is at most 4 MiB by
// default (producer.DefaultMaxPageBytes), and the portal asks for one event at a time.
const maxAPIBody = 8 << 20

// answer is what the API answered one of the portal's requests.
type answer struct {
	status int
	header http.Header
	body   []byte
	// problem is the answer's problem when it is one (a 4xx or 5xx with a problem body); an answer
	// the portal could not read as one gets a generic problem.
	problem *apierror.Error
}

// ok reports a 2xx answer.
func (a *answer) ok() bool { return a.status >= 200 && a.status < 300 }

// bodyOmitted reports a replay the idempotency middleware sent without its body: the original
// carried a secret (idempotency.Secret), which no record keeps in the clear, or was too large to keep.
func (a *answer) bodyOmitted() bool { return a.header.Get(idempotency.HeaderBodyOmitted) == "true" }

// decode reads a 2xx answer's JSON body into dst.
func (a *answer) decode(dst any) error {
	if err := json.Unmarshal(a.body, dst); err != nil {
		return fmt.Errorf("portal: reading the API's answer: %w", err)
	}
	return nil
}

// recorder is the http.ResponseWriter the API writes its answer to, in memory.
type recorder struct {
	header  http.Header
	status  int
	body    bytes.Buffer
	tooMuch bool
}

func (rec *recorder) Header() http.Header { return rec.header }

func (rec *recorder) WriteHeader(code int) {
	if rec.status == 0 && code >= 200 {
		rec.status = code
	}
}

func (rec *recorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.body.Len()+len(b) > maxAPIBody {
		rec.tooMuch = true
		return 0, fmt.Errorf("portal: the API's answer is larger than %d bytes", maxAPIBody)
	}
	return rec.body.Write(b)
}

// call makes one request to the API as s: method, the API path under s's version (path starts with
// "/"), a JSON body when body is not nil, and the Idempotency-Key key when it is not empty. The
// original request r lends its context, remote address and host.
func (p *Portal) call(r *http.Request, s Session, method, path string, body any, key string) *answer {
	var rd io.Reader = http.NoBody
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return p.internal(r, fmt.Errorf("portal: encoding a request: %w", err))
		}
		rd = bytes.NewReader(b)
	}
	target := path
	if s.Version != "" {
		target = "/" + s.Version + path
	}
	ctx := apikey.NewContext(context.WithoutCancel(r.Context()), s.principal())
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return p.internal(r, fmt.Errorf("portal: building a request to %s: %w", target, err))
	}
	req.RemoteAddr, req.Host = r.RemoteAddr, r.Host
	req.RequestURI = req.URL.RequestURI()
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "svc-portal")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set(idempotency.HeaderKey, key)
	}
	rec := &recorder{header: make(http.Header)}
	p.api.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	a := &answer{status: rec.status, header: rec.header, body: rec.body.Bytes()}
	if rec.tooMuch {
		return p.internal(r, fmt.Errorf("portal: %s %s: the answer is larger than %d bytes", method, target, maxAPIBody))
	}
	if !a.ok() {
		resp := &http.Response{StatusCode: a.status, Header: a.header, Body: io.NopCloser(bytes.NewReader(a.body))}
		pe, err := apierror.Parse(resp)
		if err != nil || pe == nil {
			p.log.Warn("portal: the API answered without a problem", "method", method, "path", target, "status", a.status)
			pe = &apierror.Error{Status: a.status, Title: http.StatusText(a.status), Detail: "The request failed."}
		}
		a.problem = pe
	}
	return a
}

// internal is the answer of a request the portal could not make or read: logged, and shown as the
// opaque failure the API would show.
func (p *Portal) internal(r *http.Request, err error) *answer {
	p.log.Error("portal: internal error", "path", r.URL.Path, "error", err)
	return &answer{status: http.StatusInternalServerError, problem: &apierror.Error{Status: http.StatusInternalServerError,
		Title: "Internal Server Error", Detail: "Something went wrong on our side; try again in a moment."}}
}

// fieldOf names the form field a violation is about: the first token of its body pointer
// ("/url" → "url", "/headers/X-Tenant" → "headers"), or its query parameter's name; "" for a
// violation of the request as a whole.
func fieldOf(v apierror.Violation) string {
	switch v.Location {
	case apierror.LocationBody:
		tok, _, _ := strings.Cut(strings.TrimPrefix(v.Pointer, "/"), "/")
		return tok
	case apierror.LocationQuery, apierror.LocationPath:
		return v.Name
	}
	return ""
}
