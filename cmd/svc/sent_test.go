package main

import (
	"bytes"
	"io"
	"net/http"
	"sync"

	"github.com/svcplatform/conventions/idempotency"
)

// sentRequest is one request as svc sent it to a test server.
type sentRequest struct {
	Method, Path, Query, IdempotencyKey, Body string
}

// sentLog records the requests that reach a test server, before its handler sees them.
type sentLog struct {
	mu   sync.Mutex
	reqs []sentRequest
	// before, when set, runs for each request after it is recorded: a test moves the server's clock
	// between two of svc's requests with it.
	before func(r *http.Request)
}

func (l *sentLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		l.mu.Lock()
		l.reqs = append(l.reqs, sentRequest{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
			IdempotencyKey: r.Header.Get(idempotency.HeaderKey), Body: string(body)})
		before := l.before
		l.mu.Unlock()
		if before != nil {
			before(r)
		}
		next.ServeHTTP(w, r)
	})
}

// take returns the requests recorded since the last take.
func (l *sentLog) take() []sentRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	reqs := l.reqs
	l.reqs = nil
	return reqs
}
