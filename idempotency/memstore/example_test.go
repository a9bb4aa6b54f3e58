package memstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/idempotency/memstore"
)

// A bounded store under the middleware: the retry with the same key replays the first response, and
// the order is placed once.
func Example() {
	store := memstore.New(&memstore.Options{MaxRecords: 1000, MaxRecordsPerScope: 100})
	m, err := idempotency.New(&idempotency.Options{Store: store})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = m.Close(context.Background()) }()
	orders := 0
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		orders++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"ord_%d"}`, orders)
	}))
	for range 2 {
		r := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(`{"side":"buy"}`))
		r.Header.Set("Authorization", "Bearer sk_sandbox_example")
		r.Header.Set(idempotency.HeaderKey, "order-1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%d %s replayed=%q\n", w.Code, w.Body, w.Header().Get(idempotency.HeaderReplayed))
	}
	fmt.Println("orders placed:", orders, "records:", store.Len())
	// Output:
	// 201 {"id":"ord_1"} replayed=""
	// 201 {"id":"ord_1"} replayed="true"
	// orders placed: 1 records: 1
}
