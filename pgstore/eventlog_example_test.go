package pgstore_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// The transactional outbox: the order and its webhook event commit together, or neither does. The
// event is numbered after the commit, by the Dispatcher's sequencer, so the order's transaction never
// waits for another order's; the stream's sequences stay gap-free either way. (Compiled, not run: it
// needs a PostgreSQL.)
func ExampleNewEventLog() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	opts := &pgstore.EventLogOptions{Schema: "webhooks"}
	if err := pgstore.Migrate(ctx, pool, opts); err != nil {
		log.Fatal(err)
	}
	eps, _ := memstore.NewEndpoints(producer.Endpoint{
		ID: "we_123", URL: "https://consumer.example/hooks", Owner: "lic_1", Secrets: []string{os.Getenv("WEBHOOK_SECRET")},
	})
	events, err := pgstore.NewEventLog(pool, opts) // shared by the Dispatcher and the RangeHandler
	if err != nil {
		log.Fatal(err)
	}
	pub, err := producer.NewPublisher(events, eps, nil)
	if err != nil {
		log.Fatal(err)
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `INSERT INTO orders (id, qty) VALUES ($1, $2)`, "ord_1", 3); err != nil {
		log.Fatal(err)
	}
	// events.WithDB(tx) is the same log inside the order's transaction: it shares the statements.
	ev, err := pub.WithLog(events.WithDB(tx)).Publish(ctx, "we_123", "order.created",
		map[string]any{"id": "ord_1", "qty": 3})
	if err != nil {
		log.Fatal(err) // the deferred rollback takes the order back too
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}

	d, err := producer.NewDispatcher(events, eps, nil)
	if err != nil {
		log.Fatal(err)
	}
	d.Wake() // numbers ev at once instead of at the sequencer's next poll; never blocks
	log.Printf("order ord_1 is event %s of we_123", ev.ID)
	_ = d.Run(ctx) // in its own goroutine in a real service: numbers, then delivers; stops when ctx is cancelled
}
