package ratelimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/ratelimit"
)

type userKey struct{}

// A service with its own authentication limits each user: the key function names the caller, and an
// empty key (an operator here) is not limited.
func Example() {
	// 1 request per second on average, 2 at once; the clock stands still in this example.
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	bucket, err := ratelimit.NewTokenBucket(1, 2, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	byUser := func(r *http.Request) (string, error) {
		user, ok := r.Context().Value(userKey{}).(string)
		switch {
		case !ok:
			return "", apierror.Unauthenticated("user_missing", "sign in first")
		case user == "operator":
			return "", nil
		}
		return "user:" + user, nil
	}
	limit, err := ratelimit.New(bucket, byUser, &ratelimit.Options{Now: func() time.Time { return now }})
	if err != nil {
		fmt.Println(err)
		return
	}
	h := limit.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	get := func(user string) int {
		r := httptest.NewRequest(http.MethodGet, "/v1/things", nil)
		if user != "" {
			r = r.WithContext(context.WithValue(r.Context(), userKey{}, user)) // the service's own auth
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	fmt.Println("ann:     ", get("ann"), get("ann"), get("ann"))
	fmt.Println("bob:     ", get("bob"))
	fmt.Println("operator:", get("operator"), get("operator"), get("operator"))
	fmt.Println("nobody:  ", get(""))
	// Output:
	// ann:      200 200 429
	// bob:      200
	// operator: 200 200 200
	// nobody:   401
}

// A TokenBucket decides without HTTP: one bucket per key, refilled at the rate.
func ExampleTokenBucket() {
	bucket, err := ratelimit.NewTokenBucket(2, 1, nil) // 2 a second, 1 at once
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, now := context.Background(), time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{0, 0, 500 * time.Millisecond} {
		ok, retry, _ := bucket.Allow(ctx, "live:lic_42", now.Add(at))
		fmt.Println(at, ok, retry)
	}
	// Output:
	// 0s true 0s
	// 0s false 500ms
	// 500ms true 0s
}
