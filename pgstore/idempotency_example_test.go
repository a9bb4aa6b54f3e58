package pgstore_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/idempotency"
	"github.com/svcplatform/conventions/pgstore"
)

// Every replica runs the same code against the same database: an Idempotency-Key is honoured
// whichever replica each retry reaches.
func ExampleNewIdempotencyStore() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	opts := &pgstore.IdempotencyStoreOptions{Schema: "platform"} // table platform.idempotency_keys
	if err := pgstore.Migrate(ctx, pool, opts); err != nil {
		log.Fatal(err)
	}
	store, err := pgstore.NewIdempotencyStore(pool, opts)
	if err != nil {
		log.Fatal(err)
	}
	mw, err := idempotency.New(&idempotency.Options{Store: store})
	if err != nil {
		log.Fatal(err)
	}

	createOrder := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprint(w, `{"id":"ord_1"}`)
	})
	http.Handle("POST /v1/orders", mw.Handler(createOrder))
	log.Fatal(http.ListenAndServe(":8080", nil))
}

// Expired records are invisible at once; RunCleanup frees their space in short, bounded batches for
// as long as its context lives.
func ExampleIdempotencyStore_RunCleanup() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop() // ends the cleanup loop
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := pgstore.NewIdempotencyStore(pool, nil)
	if err != nil {
		log.Fatal(err)
	}

	go func() { _ = store.RunCleanup(ctx, &pgstore.CleanupOptions{Logger: slog.Default()}) }()
	// … serve requests until shutdown …
}

// The transactional mode: the claim, the order and the stored response commit together. If anything
// fails before the commit (a panic, a constraint, a crash, a lost connection) nothing happened and a
// retry runs the handler again; once it commits, every retry replays the stored response.
func ExampleNewTransactor() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := pgstore.Migrate(ctx, pool, &pgstore.IdempotencyStoreOptions{}); err != nil {
		log.Fatal(err)
	}
	tr, err := pgstore.NewTransactor(pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	mw, err := idempotency.New(&idempotency.Options{Transactor: tr})
	if err != nil {
		log.Fatal(err)
	}

	createOrder := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Account string `json:"account"`
			Side    string `json:"side"`
		}
		if err := apierror.Decode(r, &in, nil); err != nil {
			apierror.Write(w, r, err) // a 400 is stored and replayed like any answer
			return
		}
		// Write through the request's transaction, never through the pool: only the transaction's
		// writes commit with the stored response.
		tx, _ := pgstore.TxFromContext(r.Context())
		var id string
		err := tx.QueryRow(r.Context(),
			`INSERT INTO orders (account, side) VALUES ($1, $2) RETURNING id`, in.Account, in.Side).Scan(&id)
		if err != nil {
			// The transaction is aborted: the middleware rolls it back and answers 503, so the client
			// retries with the same key and nothing half-done remains.
			apierror.Write(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/v1/orders/"+id)
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":%q,"account":%q,"side":%q}`, id, in.Account, in.Side)
	})
	http.Handle("POST /v1/orders", mw.Handler(createOrder))
	log.Fatal(http.ListenAndServe(":8080", nil))
}
