// Package reqnote is the note a request log keeps about one request while it runs: a small mutable
// value in the request context that the library's own middlewares fill when it is there — the
// authenticator with the key and its owner, the versioning router with the version, the idempotency
// middleware with the key and whether it replayed, apierror's Writer with the problem's code and its
// ServeMux with the route. requestlog puts it there and reads it when the request is done.
//
// When no note is in the context every method is a no-op on a nil *Note, so a call site costs one
// context lookup and nothing else. A Note is safe for concurrent use: a handler may hand its request
// to a goroutine that outlives it (http.TimeoutHandler's does), and the log reads the note as soon
// as the handler returns.
package reqnote

import (
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"sync"
)

// Note is what the middlewares tell about one request. The zero value is an empty note, ready to use.
type Note struct {
	mu             sync.Mutex
	keyID          string
	owner          string
	environment    string
	version        string
	idempotencyKey string
	replayed       bool
	code           string
	route          string
}

// Fields is a copy of a Note's contents.
type Fields struct {
	KeyID, Owner, Environment, Version, IdempotencyKey, Code, Route string
	Replayed                                                        bool
}

type noteKey struct{}

// NewContext returns a copy of ctx that carries n.
func NewContext(ctx context.Context, n *Note) context.Context {
	return context.WithValue(ctx, noteKey{}, n)
}

// From returns the note in ctx, or nil when there is none; every method of a nil *Note does nothing.
func From(ctx context.Context) *Note {
	n, _ := ctx.Value(noteKey{}).(*Note)
	return n
}

// SetPrincipal notes who the request was authenticated as.
func (n *Note) SetPrincipal(keyID, owner, environment string) {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.keyID, n.owner, n.environment = keyID, owner, environment
	n.mu.Unlock()
}

// SetVersion notes the API version the request was addressed to.
func (n *Note) SetVersion(v string) {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.version = v
	n.mu.Unlock()
}

// SetIdempotencyKey notes the request's (well-formed) Idempotency-Key.
func (n *Note) SetIdempotencyKey(k string) {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.idempotencyKey = k
	n.mu.Unlock()
}

// SetCode notes the code of the problem written. The last one wins: a buffering layer (a
// transactional idempotency recorder, a versioning shaper) may discard a problem and write another.
func (n *Note) SetCode(code string) {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.code = code
	n.mu.Unlock()
}

// SetRoute notes the pattern the request was routed by. The last one wins: a mux inside a mux
// notes the more precise pattern.
func (n *Note) SetRoute(pattern string) {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.route = pattern
	n.mu.Unlock()
}

// maxProblemBody bounds the stored body SetReplayed reads the code from: problems are small, and a
// large body is not one worth parsing on the request's path.
const maxProblemBody = 64 << 10

// SetReplayed notes that the request was answered with a stored response, and, when that response
// is a problem (application/problem+json), its code: apierror's Writer is not called on a replay.
func (n *Note) SetReplayed(status int, header http.Header, body []byte) {
	if n == nil {
		return
	}
	code := ""
	if status >= 400 && len(body) > 0 && len(body) <= maxProblemBody && isProblem(header.Get("Content-Type")) {
		var p struct {
			Code string `json:"code"`
		}
		if json.Unmarshal(body, &p) == nil {
			code = p.Code
		}
	}
	n.mu.Lock()
	n.replayed = true
	if code != "" {
		n.code = code
	}
	n.mu.Unlock()
}

func isProblem(ct string) bool {
	if ct == "application/problem+json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/problem+json"
}

// Fields returns a copy of what was noted.
func (n *Note) Fields() Fields {
	if n == nil {
		return Fields{}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return Fields{KeyID: n.keyID, Owner: n.owner, Environment: n.environment, Version: n.version,
		IdempotencyKey: n.idempotencyKey, Code: n.code, Route: n.route, Replayed: n.replayed}
}
