package versioning

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/internal/reqnote"
)

// Decision is what the router decided for one request. It is a plain value, copied into the request
// context; the zero Decision means no decision was made.
type Decision struct {
	// Version is the version the request is addressed to and served at.
	Version Version
	// Deprecated reports whether Version is deprecated at the decision's instant.
	Deprecated bool
	// Licensee is the request's licensee, "" when the Licensee hook named none.
	Licensee string
	// Pinned is the licensee's pin after this request, "" without a licensee.
	Pinned string
	// PinChanged reports that this request created the pin (first use) or moved a pin whose version
	// had been sunset or removed.
	PinChanged bool
	// Override reports that the request was served on another version than the pin because
	// AllowOverride allowed it.
	Override bool
	// At is the instant the decision was made at, by Options.Now: the lifecycle headers and the
	// successor they name are those of this instant.
	At time.Time
}

// Decide is the router's decision for r without HTTP, for callers who do not use the middleware:
// the Decision, or an error wrapping a condition (ErrUnknownVersion, ErrVersionSunset,
// ErrNotEnabled, ErrPinUnavailable) and the *apierror.Error to answer with. For a known version the
// Decision's Version is set even when err is not nil, so that the lifecycle headers can be sent.
//
// Deciding has effects: it may create or move the licensee's pin, and it calls Options.Hooks.
func (rt *Router) Decide(r *http.Request) (Decision, error) {
	if rt == nil || rt.reg == nil {
		return Decision{}, errZeroRouter
	}
	d, _, err := rt.decide(r)
	return d, err
}

// decide returns the decision, the version's index in the registry (-1 when unknown) and the error.
func (rt *Router) decide(r *http.Request) (Decision, int, error) {
	now := rt.now()
	name, _, ok := ParsePath(r.URL.Path)
	i := -1
	if ok {
		if j, found := rt.reg.index[name]; found && rt.reg.versions[j].IsReleased(now) {
			i = j
		}
	}
	if i < 0 {
		if !ok {
			name = ""
		}
		if rt.decided != nil {
			// Never the segment itself: the client chooses it.
			rt.decided(r.Context(), Observation{At: now, Lifecycle: LifecycleUnknown, Outcome: OutcomeUnknown,
				Duration: rt.now().Sub(now)})
		}
		return Decision{}, -1, &decisionError{cause: ErrUnknownVersion, problem: problemUnknown(name, rt.reg.Supported(now))}
	}
	v := rt.reg.versions[i]
	d := Decision{Version: v, Deprecated: v.IsDeprecated(now), At: now}
	var err error
	if v.IsSunset(now) {
		err = &decisionError{cause: ErrVersionSunset, problem: problemSunset(v, rt.reg.liveSuccessor(i, now), rt.reg.Supported(now))}
		if rt.licensee != nil {
			if lic, lerr := rt.licensee(r); lerr == nil {
				d.Licensee = lic
			}
		}
	} else if rt.licensee != nil {
		lic, lerr := rt.licensee(r)
		switch {
		case lerr != nil:
			err = lerr
		case lic != "":
			d.Licensee = lic
			err = rt.enforcePin(r, &d, i, now)
		}
	}
	if rt.decided != nil {
		ob := Observation{At: now, Version: v.Name, Licensee: d.Licensee, Pinned: d.Pinned, PinChanged: d.PinChanged,
			Outcome: OutcomeServed, Duration: rt.now().Sub(now)}
		switch {
		case v.IsSunset(now):
			ob.Lifecycle = LifecycleSunset
		case d.Deprecated:
			ob.Lifecycle = LifecycleDeprecated
		}
		switch {
		case err != nil:
			ob.Outcome = outcomeOf(err)
		case d.Override:
			ob.Outcome = OutcomeOverride
		}
		rt.decided(r.Context(), ob)
	}
	return d, i, err
}

// Handler returns the middleware around next, the shared handler that produces the newest shape.
// Versions with their own Handler are sent there instead. next may be nil only when every version
// has its own Handler; otherwise Handler panics, a programming error found at start-up.
func (rt *Router) Handler(next http.Handler) http.Handler {
	if rt == nil || rt.reg == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { apierror.Write(w, r, errZeroRouter) })
	}
	if next == nil {
		for _, v := range rt.reg.versions {
			if v.Handler == nil {
				panic("versioning: Handler(nil), but version " + v.Name + " has no Handler of its own")
			}
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rt.serve(w, r, next) })
}

func (rt *Router) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	d, i, err := rt.decide(r)
	if i >= 0 {
		rt.setHeaders(w.Header(), r, i, d.At)
		reqnote.From(r.Context()).SetVersion(rt.reg.versions[i].Name)
	}
	if err != nil {
		rt.writer.Write(w, r, err)
		return
	}
	r = r.WithContext(NewContext(r.Context(), d))
	if rt.strip {
		stripVersion(r)
	}
	v := &rt.reg.versions[i]
	if v.Handler != nil {
		v.Handler.ServeHTTP(w, r)
		return
	}
	need := rt.reg.shape[i]
	if need.request && !rt.shapeRequest(w, r, i) {
		return
	}
	if need.response {
		rt.serveShaped(w, r, i, next)
		return
	}
	next.ServeHTTP(w, r)
}

// Canonical header keys, to index the header map directly.
const (
	keyVersion     = "X-Svc-Version"
	keyDeprecation = "Deprecation"
	keySunset      = "Sunset"
	keyLink        = "Link"
)

// setHeaders sets X-SVC-Version and, for a version with a deprecation scheduled, Deprecation,
// Sunset and the Link relations. Links are added to any an outer handler set. The successor-version
// link names the nearest successor that answers at now (released, not sunset), never one that would
// answer 404 or 410, and is left out when there is none, or when its target would repeat a value
// shaped like a credential (carriesCredential).
func (rt *Router) setHeaders(h http.Header, r *http.Request, i int, now time.Time) {
	vh := &rt.reg.header[i]
	v := &rt.reg.versions[i]
	if vh.deprecation == "" {
		h[keyVersion] = []string{v.Name}
		return
	}
	// One allocation for the three values; each slice is capped, so an Add by the handler copies
	// instead of writing into its neighbour.
	vals := [...]string{v.Name, vh.deprecation, vh.sunset}
	h[keyVersion] = vals[0:1:1]
	h[keyDeprecation] = vals[1:2:2]
	if vh.sunset != "" {
		h[keySunset] = vals[2:3:3]
	}
	if successor := rt.reg.liveSuccessor(i, now); successor != "" {
		var target string
		if rt.successorLink != nil {
			target = rt.successorLink(r, successor)
		} else {
			target = successorPath(r, successor)
		}
		if target != "" && !carriesCredential(target) {
			h[keyLink] = append(h[keyLink], "<"+target+`>; rel="successor-version"`)
		}
	}
	if vh.depLink != "" {
		h[keyLink] = append(h[keyLink], vh.depLink)
	}
}

// carriesCredential reports whether a link target holds a word shaped like a credential, as written
// or percent-decoded (apierror.LooksLikeCredential). The target is built from the request's path
// (or by Options.SuccessorLink, often from it too), and a client that pasted its live key into a
// path must not see it reflected into a response header, and every log and proxy on the way: such
// a link is left out, the Deprecation and Sunset headers still announce the deprecation.
func carriesCredential(target string) bool {
	if apierror.LooksLikeCredential(target) {
		return true
	}
	if strings.IndexByte(target, '%') < 0 {
		return false
	}
	dec, err := url.PathUnescape(target)
	return err != nil || apierror.LooksLikeCredential(dec)
}

// successorPath is the request's path with its version segment replaced by successor. It starts
// from the request target the client sent, so prefixes an outer http.StripPrefix removed stay; when
// that target does not end with the path the router sees, it uses the router's path alone.
func successorPath(r *http.Request, successor string) string {
	escaped := r.URL.EscapedPath()
	rest := ""
	if k := strings.IndexByte(escaped[1:], '/'); k >= 0 {
		rest = escaped[1+k:]
	}
	prefix := ""
	target := r.RequestURI
	if q := strings.IndexByte(target, '?'); q >= 0 {
		target = target[:q]
	}
	if len(target) > len(escaped) && strings.HasSuffix(target, escaped) {
		prefix = target[:len(target)-len(escaped)]
		if strings.ContainsAny(prefix, "<>\" \t\r\n,;") {
			prefix = ""
		}
	}
	return prefix + "/" + successor + rest
}

// stripVersion removes the version segment from r's path, on r's own copy of the URL.
func stripVersion(r *http.Request) {
	u := *r.URL
	r.URL = &u
	_, rest, _ := ParsePath(u.Path)
	if rest == "" {
		rest = "/"
	}
	u.Path = rest
	if u.RawPath != "" {
		raw := ""
		if k := strings.IndexByte(u.RawPath[1:], '/'); k >= 0 {
			raw = u.RawPath[1+k:]
		}
		u.RawPath = ""
		if raw != "" && raw != rest {
			// Keep the escaped form only when it still encodes the stripped path.
			if p, err := url.PathUnescape(raw); err == nil && p == rest {
				u.RawPath = raw
			}
		}
	}
}

// peekSize is how much of a body not declared as JSON is looked at to find its first significant byte.
const peekSize = 512

// peekedBody is a request body with its first bytes buffered, closing the original.
type peekedBody struct {
	io.Reader
	io.Closer
}

// mayBeObject reports whether the body in br may be a JSON object: its first byte that is not JSON
// whitespace is '{', or none was found within peekSize bytes. It consumes nothing. A read error
// other than the end of the body reports true, so that the caller's full read meets the error again
// and answers it.
func mayBeObject(br *bufio.Reader) bool {
	for k := 1; k <= br.Size(); k++ {
		b, err := br.Peek(k)
		if len(b) < k {
			return err != nil && !errors.Is(err, io.EOF)
		}
		switch b[k-1] {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return true
		default:
			return false
		}
	}
	return true
}

// isJSON reports whether a Content-Type is application/json, parameters aside. Only plain JSON is
// shaped: problem+json bodies are the same in every version.
func isJSON(ct string) bool {
	if k := strings.IndexByte(ct, ';'); k >= 0 {
		ct = ct[:k]
	}
	return strings.EqualFold(strings.TrimSpace(ct), "application/json")
}

// shapeRequest rewrites a JSON request body from r's version to the newest shape. It reports false
// after writing a problem.
//
// The Content-Type does not decide: handlers' JSON decoders (apierror.Decode among them) read the
// body whatever it declares, and clients send JSON as application/x-www-form-urlencoded (curl -d),
// application/merge-patch+json or nothing at all. A body declared as JSON is read; any other is
// read only when its first significant byte opens a JSON object, the only thing a transform
// shapes, and otherwise reaches the handler untouched and unbounded (an upload, a form).
func (rt *Router) shapeRequest(w http.ResponseWriter, r *http.Request, i int) bool {
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	var src io.Reader = r.Body
	if !isJSON(r.Header.Get("Content-Type")) {
		br := bufio.NewReaderSize(r.Body, peekSize)
		if !mayBeObject(br) {
			r.Body = peekedBody{Reader: br, Closer: r.Body}
			return true
		}
		src = br
	}
	body, err := io.ReadAll(io.LimitReader(src, rt.maxReq+1))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			rt.writer.Write(w, r, apierror.BodyTooLarge(tooLarge.Limit))
			return false
		}
		rt.writer.Write(w, r, apierror.Invalid(apierror.Body("", "body_unreadable", "the request body could not be read")))
		return false
	}
	if int64(len(body)) > rt.maxReq {
		rt.writer.Write(w, r, apierror.BodyTooLarge(rt.maxReq))
		return false
	}
	out, err := rt.reg.transformRequest(body, i)
	switch {
	case errors.Is(err, errNotJSON):
		// The handler's strict decoder reports malformed JSON with its location.
		out = body
	case err != nil:
		var p *apierror.Error
		if !errors.As(err, &p) {
			rt.log.ErrorContext(r.Context(), "versioning: request transform failed", "version", rt.reg.versions[i].Name, "error", apierror.Redact(err.Error()))
		}
		rt.writer.Write(w, r, err)
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(out))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(out)), nil }
	r.ContentLength = int64(len(out))
	r.TransferEncoding = nil
	// The header map is shared with the caller's request: change a copy.
	r.Header = r.Header.Clone()
	if r.Header.Get("Content-Length") != "" {
		r.Header.Set("Content-Length", strconv.Itoa(len(out)))
	}
	return true
}
