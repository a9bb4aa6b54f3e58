// This file holds the package's runnable Examples and the TestMain that decides whether they run.
//
// Every runnable Example of pgstore talks to the PostgreSQL named by SVC_TEST_POSTGRES_DSN, and its
// // Output: is what that server answered: nothing here prints an expected answer without a server.
// An Example cannot skip itself the way a test calls t.Skip, so when the variable is unset TestMain
// adds "^Example" to -test.skip (serviceprobe.SkipExamplesUnset) before the run: the Examples are left
// out, as if skipped, and go test -v says so on one line. When the variable is set they run, and fail
// if the server does not answer, like every other real-server test of this module. Each Example works
// in a schema of its own and drops it.
//
// The Examples without // Output: elsewhere in the package are compiled and never run, so they need
// no such care.
package pgstore_test

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/internal/testkit/serviceprobe"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
)

func TestMain(m *testing.M) {
	flag.Parse()
	serviceprobe.SkipExamplesUnset(pgtest.EnvDSN, "PostgreSQL")
	os.Exit(m.Run())
}

// Two replicas of a service share one PostgreSQL: a retry that reaches the other replica is answered
// from the stored record, and the order is created once.
func ExampleIdempotencyStore() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("SVC_TEST_POSTGRES_DSN"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	opts := &pgstore.IdempotencyStoreOptions{Schema: exampleSchema()}
	defer dropSchema(pool, opts.Schema)
	if err := pgstore.Migrate(ctx, pool, opts); err != nil {
		fmt.Println(err)
		return
	}
	store, err := pgstore.NewIdempotencyStore(pool, opts)
	if err != nil {
		fmt.Println(err)
		return
	}

	var orders atomic.Int64
	createOrder := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := fmt.Sprintf("ord_%d", orders.Add(1))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%q}`, id)
	})
	replicas := map[string]http.Handler{} // two replicas, one store
	for _, name := range []string{"a", "b"} {
		mw, err := idempotency.New(&idempotency.Options{Store: store})
		if err != nil {
			fmt.Println(err)
			return
		}
		replicas[name] = mw.Handler(createOrder)
	}
	for _, name := range []string{"a", "b"} { // the first try reaches replica a, the retry replica b
		r := httptest.NewRequest("POST", "/v1/orders", strings.NewReader(`{"account":"acc_1","side":"buy"}`))
		r.Header.Set("Authorization", "Bearer sk_sandbox_example")
		r.Header.Set("Idempotency-Key", "3f1c2a7e-5b1d-4c8e-9a0f-2d6b8e4c1a93")
		w := httptest.NewRecorder()
		replicas[name].ServeHTTP(w, r)
		fmt.Printf("replica %s: %d replayed=%q %s\n", name, w.Code, w.Header().Get("Idempotent-Replayed"), w.Body)
	}
	fmt.Println("orders created:", orders.Load())
	// Output:
	// replica a: 201 replayed="" {"id":"ord_1"}
	// replica b: 201 replayed="true" {"id":"ord_1"}
	// orders created: 1
}

// exampleSchema names a schema no other run uses; Migrate creates it.
func exampleSchema() string { return "example_" + strings.ToLower(rand.Text()) }

// dropSchema removes an Example's schema and everything in it.
func dropSchema(pool *pgxpool.Pool, schema string) {
	if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		fmt.Println("drop schema:", err)
	}
}
