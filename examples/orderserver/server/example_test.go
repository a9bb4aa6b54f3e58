package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/examples/orderserver/server"
)

// A server in memory, a sandbox key for a new evaluation, and an order created twice with the same
// Idempotency-Key: the second answer is the first one, replayed.
func Example() {
	srv, err := server.New(server.Config{})
	if err != nil {
		panic(err)
	}
	creds, err := srv.IssueCredentials(context.Background(), apikey.Sandbox)
	if err != nil {
		panic(err)
	}
	for range 2 {
		r := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(`{"account":"acc_1","side":"buy"}`))
		r.Header.Set("Authorization", "Bearer "+creds.APIKey)
		r.Header.Set("Idempotency-Key", "order-1")
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, r)
		fmt.Println(w.Code, "replayed:", w.Header().Get("Idempotent-Replayed") == "true")
	}
	fmt.Println("orders created:", srv.Stats().OrdersCreated)
	// Output:
	// 201 replayed: false
	// 201 replayed: true
	// orders created: 1
}
