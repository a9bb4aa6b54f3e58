package apikey_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/ratelimit"
)

// call serves one request with an API key and a fixed request ID, so the output is stable.
func call(h http.Handler, method, path, key, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	rec := httptest.NewRecorder()
	exampleRequestID(h).ServeHTTP(rec, r)
	return rec
}

// exampleRequestID stands in for apierror.WithRequestID, whose IDs are fresh and random, so that the
// examples' output is stable.
func exampleRequestID(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(apierror.HeaderRequestID, "req_example")
		h.ServeHTTP(w, r.WithContext(apierror.NewRequestIDContext(r.Context(), "req_example")))
	})
}

// A service with both environments in one build: the key decides which data a request sees.
func Example() {
	ctx := context.Background()
	issuer, err := apikey.NewIssuer(nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	sandboxCreds, _ := issuer.Issue(ctx, apikey.Evaluation{Licensee: "lic_42"})
	liveCreds, _ := issuer.Issue(ctx, apikey.Evaluation{Licensee: "lic_42", Environment: apikey.Live})

	// The application's own store keeps every record under the principal's scope, so the same ID
	// written with a sandbox key is another record than with the licensee's live key.
	var mu sync.Mutex
	orders := map[string]string{} // scope + "/" + ID → side
	orderKey := func(r *http.Request) string {
		p, _ := apikey.FromContext(r.Context()) // the Authenticator put it there
		return p.Scope() + "/" + r.PathValue("id")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		orders[orderKey(r)] = "buy"
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	})
	mux.HandleFunc("GET /v1/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		side, ok := orders[orderKey(r)]
		mu.Unlock()
		if !ok {
			apierror.Write(w, r, apierror.NotFound("order_not_found", "no order has this ID",
				apierror.Path("id", "order_not_found", "no order has this ID")))
			return
		}
		_, _ = io.WriteString(w, side)
	})
	auth, err := apikey.NewAuthenticator(issuer, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	h := auth.Handler(mux)

	fmt.Println(strings.HasPrefix(sandboxCreds.APIKey, "sk_sandbox_"), strings.HasPrefix(liveCreds.APIKey, "sk_live_"))
	fmt.Println("create with the sandbox key:", call(h, "PUT", "/v1/orders/ord_1", sandboxCreds.APIKey, "").Code)
	fmt.Println("read with the sandbox key:  ", call(h, "GET", "/v1/orders/ord_1", sandboxCreds.APIKey, "").Code)
	fmt.Println("read with the live key:     ", call(h, "GET", "/v1/orders/ord_1", liveCreds.APIKey, "").Code)
	fmt.Println("no key:                     ", call(h, "GET", "/v1/orders/ord_1", "", "").Code)
	// Output:
	// true true
	// create with the sandbox key: 201
	// read with the sandbox key:   200
	// read with the live key:      404
	// no key:                      401
}

// The checksum catches a mistyped key before any lookup.
func ExampleParse() {
	k, _ := apikey.New(apikey.Live)
	s := k.Reveal()
	typo := s[:len(s)-1] + map[bool]string{true: "b", false: "a"}[s[len(s)-1] == 'a']

	_, err := apikey.Parse(typo)
	fmt.Println(errors.Is(err, apikey.ErrChecksum))
	_, err = apikey.Parse("sk_test_123")
	fmt.Println(err)
	parsed, _ := apikey.Parse(s)
	fmt.Println(parsed.Environment())
	// Output:
	// true
	// apikey: API key is malformed: want the prefix sk_sandbox_ or sk_live_
	// live
}

// Issuing sandbox credentials when an evaluation starts.
func ExampleIssuer_Issue() {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	issuer, err := apikey.NewIssuer(nil, &apikey.IssuerOptions{
		Now:            func() time.Time { return now },
		SandboxBaseURL: "https://sandbox.example.com",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	creds, _ := issuer.Issue(context.Background(), apikey.Evaluation{Licensee: "lic_42", TTL: 14 * 24 * time.Hour})
	fmt.Println(creds.Environment, creds.BaseURL, creds.ExpiresAt.Format(time.DateOnly))
	fmt.Println(strings.HasPrefix(creds.APIKey, "sk_sandbox_"), strings.HasPrefix(creds.WebhookSecret, "whsec_"))
	// Printing credentials redacts the key and the secret.
	fmt.Println(strings.Contains(fmt.Sprint(creds), creds.APIKey), strings.Contains(fmt.Sprint(creds), creds.WebhookSecret))
	// Output:
	// sandbox https://sandbox.example.com 2026-03-15
	// true true
	// false false
}

// A missing key is a 401 located at the Authorization header.
func ExampleAuthenticator() {
	issuer, err := apikey.NewIssuer(nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	auth, err := apikey.NewAuthenticator(issuer, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	rec := call(auth.Handler(http.NotFoundHandler()), "GET", "/v1/orders", "", "")
	fmt.Println(rec.Code, rec.Header().Get("WWW-Authenticate"))
	fmt.Println(rec.Body.String())
	// Output:
	// 401 Bearer realm="svcplatform"
	// {"type":"https://svcplatform.dev/problems/api_key_missing","title":"Unauthorized","status":401,"detail":"header Authorization is required: send Authorization: Bearer <API key>","code":"api_key_missing","request_id":"req_example","errors":[{"location":"header","name":"Authorization","code":"api_key_missing","detail":"header Authorization is required"}]}
}

// With RateLimitKey, the same limiter throttles production and never the sandbox.
func ExampleRateLimitKey() {
	issuer, err := apikey.NewIssuer(nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	sb, _ := issuer.Issue(context.Background(), apikey.Evaluation{Licensee: "lic_42"})
	live, _ := issuer.Issue(context.Background(), apikey.Evaluation{Licensee: "lic_42", Environment: apikey.Live})
	// 1 request per second; the clock stands still, so every request arrives in the same instant.
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	bucket, err := ratelimit.NewTokenBucket(1, 1, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	limit, err := ratelimit.New(bucket, apikey.RateLimitKey, &ratelimit.Options{Now: func() time.Time { return now }})
	if err != nil {
		fmt.Println(err)
		return
	}
	auth, err := apikey.NewAuthenticator(issuer, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	h := auth.Handler(limit.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))

	sandboxOK := 0
	for range 1000 {
		if call(h, "GET", "/v1/orders", sb.APIKey, "").Code == http.StatusOK {
			sandboxOK++
		}
	}
	fmt.Println("sandbox:", sandboxOK, "of 1000")
	fmt.Println("live:", call(h, "GET", "/v1/orders", live.APIKey, "").Code, call(h, "GET", "/v1/orders", live.APIKey, "").Code)
	// Output:
	// sandbox: 1000 of 1000
	// live: 200 429
}

// Scope is the environment and the licensee: what keeps two credentials' records apart.
func ExamplePrincipal_Scope() {
	sb := apikey.Principal{Licensee: "lic_42", Environment: apikey.Sandbox}
	live := apikey.Principal{Licensee: "lic_42", Environment: apikey.Live}
	fmt.Println(sb.Scope())
	fmt.Println(live.Scope())
	fmt.Printf("%q\n", apikey.Principal{}.Scope())
	// Output:
	// sandbox:lic_42
	// live:lic_42
	// ""
}
