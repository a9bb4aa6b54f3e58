package idempotency_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
)

// A POST repeated with the same key is answered from the record: the handler, and so the order,
// runs once.
func ExampleMiddleware() {
	var orders atomic.Int64
	createOrder := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := fmt.Sprintf("ord_%d", orders.Add(1))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/v1/orders/"+id)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%q}`, id)
	})
	m, err := idempotency.New(nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	h := m.Handler(createOrder)

	for range 2 {
		r := httptest.NewRequest("POST", "/v1/orders", strings.NewReader(`{"account":"acc_1","side":"buy"}`))
		r.Header.Set("Authorization", "Bearer sk_sandbox_example")
		r.Header.Set("Idempotency-Key", "3f1c2a7e-5b1d-4c8e-9a0f-2d6b8e4c1a93")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("Location"), w.Header().Get("Idempotent-Replayed"), w.Body.String())
	}
	fmt.Println("orders created:", orders.Load())
	// Output:
	// 201 /v1/orders/ord_1  {"id":"ord_1"}
	// 201 /v1/orders/ord_1 true {"id":"ord_1"}
	// orders created: 1
}

// Reusing a key for a different request is refused with a located problem.
func ExampleMiddleware_reusedKey() {
	m, err := idempotency.New(nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	send := func(body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/v1/orders", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer sk_sandbox_example")
		r.Header.Set("Idempotency-Key", "k-1")
		r = r.WithContext(apierror.NewRequestIDContext(r.Context(), "req_example"))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	send(`{"side":"buy"}`)
	w := send(`{"side":"sell"}`)
	fmt.Println(w.Code, w.Header().Get("Content-Type"))
	fmt.Println(w.Body.String())
	// Output:
	// 422 application/problem+json
	// {"type":"https://svcplatform.dev/problems/idempotency_key_reused","title":"Unprocessable Entity","status":422,"detail":"header Idempotency-Key: this key was used with a different request (method, path, query or body); use a new key for a new request","code":"idempotency_key_reused","request_id":"req_example","errors":[{"location":"header","name":"Idempotency-Key","code":"idempotency_key_reused","detail":"was used with a different request"}]}
}

// Services whose authentication puts a principal in the request context scope records by it.
func ExampleOptions_scope() {
	type principalKey struct{}
	m, err := idempotency.New(&idempotency.Options{
		Scope: func(r *http.Request) (string, error) {
			licensee, ok := r.Context().Value(principalKey{}).(string)
			if !ok {
				return "", apierror.Unauthenticated(idempotency.CodeCredentialMissing, "header Authorization is required")
			}
			return "licensee:" + licensee + "/sandbox", nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
	for _, licensee := range []string{"lic_a", "lic_b", "lic_a"} {
		r := httptest.NewRequest("POST", "/v1/orders", nil)
		r.Header.Set("Idempotency-Key", "same-key")
		r = r.WithContext(context.WithValue(r.Context(), principalKey{}, licensee))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(licensee, w.Code, w.Header().Get("Idempotent-Replayed") == "true")
	}
	fmt.Println("executions:", m.Stats().Executed)
	// Output:
	// lic_a 201 false
	// lic_b 201 false
	// lic_a 201 true
	// executions: 2
}

// Begin is the middleware without net/http: here, an RPC-style handler.
func ExampleMiddleware_Begin() {
	m, err := idempotency.New(nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	placeOrder := func(ctx context.Context, tenant, key string, msg []byte) (string, error) {
		fp := idempotency.NewFingerprint("", "/orders.v1.Orders/Create", "", sha256.Sum256(msg))
		a, err := m.Begin(ctx, idempotency.Request{Scope: tenant, Key: key, Fingerprint: fp})
		if err != nil {
			return "", err // ErrStore: unavailable, retry later
		}
		switch a.Decision {
		case idempotency.Replay:
			return "replayed " + string(a.Response.Body), nil
		case idempotency.InUse, idempotency.Reused:
			return "", a.Problem()
		}
		result := "order for " + string(msg) // the side effect, run under a.Context()
		if err := a.Complete(ctx, idempotency.Response{Status: 200, Body: []byte(result)}); err != nil {
			return "", err
		}
		return result, nil
	}
	ctx := context.Background()
	fmt.Println(placeOrder(ctx, "tenant-1", "k1", []byte("buy 10")))
	fmt.Println(placeOrder(ctx, "tenant-1", "k1", []byte("buy 10")))
	_, err = placeOrder(ctx, "tenant-1", "k1", []byte("sell 10"))
	fmt.Println(err)
	// Output:
	// order for buy 10 <nil>
	// replayed order for buy 10 <nil>
	// apierror: 422 idempotency_key_reused: header Idempotency-Key: this key was used with a different request (method, path, query or body); use a new key for a new request
}

// The client Transport adds a key and retries with it: here the first response is lost on the
// way back, the retry is answered from the record, and the order exists once.
func ExampleTransport() {
	var orders atomic.Int64
	m, err := idempotency.New(nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "ord_%d", orders.Add(1))
	})))
	defer srv.Close()

	client := &http.Client{Transport: &idempotency.Transport{
		Base:       &dropFirstResponse{base: srv.Client().Transport},
		MinBackoff: 10 * time.Millisecond,
	}}
	req, _ := http.NewRequest("POST", srv.URL+"/v1/orders", strings.NewReader(`{"side":"buy"}`))
	req.Header.Set("Authorization", "Bearer sk_sandbox_example")
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), string(body), "orders:", orders.Load())
	// Output:
	// 201 true ord_1 orders: 1
}

// dropFirstResponse loses the first response, as a connection reset after the server did the work.
type dropFirstResponse struct {
	base    http.RoundTripper
	dropped atomic.Bool
}

func (d *dropFirstResponse) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := d.base.RoundTrip(r)
	if err == nil && d.dropped.CompareAndSwap(false, true) {
		resp.Body.Close()
		return nil, fmt.Errorf("connection reset by peer")
	}
	return resp, err
}

func ExampleValidKey() {
	for _, k := range []string{"8e03978e-40d5-43e8-bc93-6894a57f9324", "has space", "", "caf\u00e9"} {
		fmt.Printf("%q %v\n", k, idempotency.ValidKey(k))
	}
	fmt.Println(idempotency.ValidKey(idempotency.NewKey()))
	// Output:
	// "8e03978e-40d5-43e8-bc93-6894a57f9324" true
	// "has space" false
	// "" false
	// "café" false
	// true
}

func ExampleNewFingerprint() {
	body := sha256.Sum256([]byte(`{"side":"buy"}`))
	a := idempotency.NewFingerprint("POST", "/v1/orders", "b=2&a=1", body)
	b := idempotency.NewFingerprint("POST", "/v1/orders", "a=1&b=2", body)
	c := idempotency.NewFingerprint("POST", "/v1/orders", "a=1&b=3", body)
	fmt.Println(a == b, a == c)
	// Output:
	// true false
}

// A handler that charges through a payment provider passes the provider a downstream key: when the
// handler runs again for the same request — its process died after the charge, before the response
// was stored — the provider sees the same key and charges once.
func ExampleDownstreamKey() {
	charged := map[string]bool{} // the provider's own idempotency records
	charges := 0
	charge := func(idempotencyKey string) {
		if !charged[idempotencyKey] {
			charged[idempotencyKey] = true
			charges++
		}
	}
	m, err := idempotency.New(nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	crashed := false
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, err := idempotency.DownstreamKey(r.Context(), "charge")
		if err != nil {
			apierror.Write(w, r, err)
			return
		}
		charge(key) // e.g. Stripe: the Idempotency-Key header of POST /v1/payment_intents
		if !crashed {
			crashed = true
			panic("the process dies before the response is stored")
		}
		w.WriteHeader(http.StatusCreated)
	}))
	for range 2 {
		func() {
			defer func() { _ = recover() }()
			r := httptest.NewRequest("POST", "/v1/orders", strings.NewReader(`{"amount":1200}`))
			r.Header.Set("Authorization", "Bearer sk_sandbox_example")
			r.Header.Set("Idempotency-Key", "3f1c2a7e-5b1d-4c8e-9a0f-2d6b8e4c1a93")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			fmt.Println("status", w.Code)
		}()
	}
	fmt.Println("charges:", charges)
	// Output:
	// status 201
	// charges: 1
}

// A JSON API lets a retry re-serialize its body: the members in another order are the same request.
func ExampleCanonicalJSONFingerprint() {
	m, err := idempotency.New(&idempotency.Options{Fingerprint: idempotency.CanonicalJSONFingerprint})
	if err != nil {
		fmt.Println(err)
		return
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
	for _, body := range []string{`{"account":"acc_1","side":"buy"}`, `{ "side": "buy", "account": "acc_1" }`} {
		r := httptest.NewRequest("POST", "/v1/orders", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer sk_sandbox_example")
		r.Header.Set("Idempotency-Key", "k-1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%d replayed=%q\n", w.Code, w.Header().Get("Idempotent-Replayed"))
	}
	// Output:
	// 201 replayed=""
	// 201 replayed="true"
}
