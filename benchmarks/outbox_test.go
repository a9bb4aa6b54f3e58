package benchmarks

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svcplatform/conventions/internal/testkit/testid"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// BenchmarkPGOutbox measures issue 20's case: one busy licensee. SVC_BENCH_CLIENTS clients place
// orders for the same licensee at once, on the library path a team wires: each order is one
// transaction on a pool that inserts the order row and appends an order.created event to each of the
// licensee's endpoints in one statement (producer.Publisher.PublishToEach on a pgstore.EventLog built
// on the transaction — the transactional outbox), then commits and wakes the sequencer. pgbench -N runs at the same client
// count in the same run.
//
//   - endpoints=N/after-commit is the library as it is: the append locks no shared row, and a
//     producer.Sequencer numbers committed events in the background. It reports the lag from an
//     order's commit to its event's numbering (lag-p50-ms, lag-p99-ms), measured on every order (its
//     first event; an order's events are numbered together).
//   - endpoints=N/in-tx is the design it replaced, for comparison: the append takes the stream's
//     counter row inside the order's transaction (the statement pgstore used before issue 20), so the
//     orders of one stream commit one at a time.
//
// orders/s against pgbench's tps is the ratio; ns/op, B/op and allocs/op are per order over the timed
// part, every goroutine of the process counted (clients, pgx, the sequencer).
func BenchmarkPGOutbox(b *testing.B) {
	dsn := requireDSN(b)
	pgbench := requirePgbench(b)
	k := loadKnobs(b)
	var (
		tpsOnce sync.Once
		tps     float64
	)
	pgbenchTPS := func(b *testing.B) float64 {
		tpsOnce.Do(func() { tps = runPgbench(b, pgbench, dsn, k.clients, k.pgbenchSeconds) })
		return tps
	}
	for _, endpoints := range []int{1, 8} {
		for _, mode := range []string{"after-commit", "in-tx"} {
			b.Run(fmt.Sprintf("endpoints=%d/%s", endpoints, mode), func(b *testing.B) {
				benchOutbox(b, dsn, k, endpoints, mode == "in-tx", pgbenchTPS)
			})
		}
	}
}

// inTxAppend is the append of pgstore.EventLog before issue 20: the stream's counter row is bumped
// and the event inserted with the new number in one statement, the row locked until the commit.
const inTxAppend = `WITH c AS (
    INSERT INTO webhook_events_streams AS c (stream, last_seq) VALUES ($1, 1)
    ON CONFLICT (stream) DO UPDATE SET last_seq = c.last_seq + 1
    RETURNING last_seq)
INSERT INTO webhook_events (stream, seq, id, type, created, api_version, data)
SELECT $1, c.last_seq, $2, $3, $4, $5, $6 FROM c`

func benchOutbox(b *testing.B, dsn string, k throughputKnobs, endpoints int, inTx bool, pgbenchTPS func(*testing.B) float64) {
	ctx := context.Background()
	tracer := newStmtTracer(k.trace)
	pool := schemaPool(b, dsn, 32, tracer)
	if err := pgstore.Migrate(ctx, pool, &pgstore.EventLogOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (
    id text PRIMARY KEY, licensee text NOT NULL, account text NOT NULL, side text NOT NULL, created bigint NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	eps := make([]producer.Endpoint, endpoints)
	for i := range eps {
		eps[i] = producer.Endpoint{ID: fmt.Sprintf("we_busy_%d", i), URL: "https://consumer.example/hooks",
			Owner: "lic_busy", Secrets: []string{webhook.NewSecret()}}
	}
	registry, err := memstore.NewEndpoints(eps...)
	if err != nil {
		b.Fatal(err)
	}
	log := must(pgstore.NewEventLog(pool, nil))
	pub, err := producer.NewPublisher(log, registry, nil)
	if err != nil {
		b.Fatal(err)
	}

	// The sequencer, with the numbering instant of each order's first event (the lag sample; an
	// order's events are numbered in one batch) and a count of all it numbered.
	var (
		mu        sync.Mutex
		count     int
		numbered  = map[string]time.Time{}
		committed = map[string]time.Time{}
	)
	seq, err := producer.NewSequencer(log, &producer.SequencerOptions{OnSequenced: func(runs []driver.SequencedRun) {
		at := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for _, r := range runs {
			count += len(r.IDs)
			for _, id := range r.IDs {
				if _, sampled := committed[id]; sampled || endpoints == 1 {
					numbered[id] = at
				}
			}
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	if !inTx {
		running.Go(func() { _ = seq.Run(runCtx) })
	}
	defer func() { stop(); running.Wait() }()

	data := json.RawMessage(eventPayload(0))
	run := testid.New("")
	order := func(_, i int) error {
		id := fmt.Sprintf("ord_%s_%d", run, i)
		ids, err := placeOrder(ctx, pool, pub, eps, id, data, inTx)
		if err != nil {
			return err
		}
		if inTx {
			return nil
		}
		at := time.Now()
		seq.Wake()
		mu.Lock()
		if _, done := numbered[ids[0]]; !done { // numbered before the client saw its commit: lag 0
			committed[ids[0]] = at
		} else {
			committed[ids[0]] = numbered[ids[0]]
		}
		mu.Unlock()
		return nil
	}
	total, warm := k.orders*b.N, warmups(k.clients)
	m, stmts, trips := orderPhase(b, k.clients, total, tracer, order)

	// Every event of every order, numbered 1.. on each stream with no gap.
	want := (warm + total)
	if !inTx {
		if err := waitNumbered(ctx, log, &mu, &count, want*endpoints); err != nil {
			b.Fatal(err)
		}
	}
	for _, ep := range eps {
		var n, maxSeq int64
		if err := pool.QueryRow(ctx, `SELECT count(*), coalesce(max(seq), 0) FROM webhook_events WHERE stream = $1`, ep.ID).
			Scan(&n, &maxSeq); err != nil {
			b.Fatal(err)
		}
		if n != int64(want) || maxSeq != int64(want) {
			b.Fatalf("%s: %d events, last sequence %d; want %d and %d", ep.ID, n, maxSeq, want, want)
		}
	}

	reportOrders(b, m, total, pgbenchTPS(b), stmts, trips)
	if !inTx {
		mu.Lock()
		lags := make([]time.Duration, 0, len(committed))
		for id, c := range committed {
			lags = append(lags, max(0, numbered[id].Sub(c)))
		}
		mu.Unlock()
		slices.Sort(lags)
		b.ReportMetric(ms(percentile(lags, 0.50)), "lag-p50-ms")
		b.ReportMetric(ms(percentile(lags, 0.99)), "lag-p99-ms")
	}
}

// placeOrder commits one order and its events (one per endpoint) in one transaction and returns the
// events' IDs.
func placeOrder(ctx context.Context, pool *pgxpool.Pool, pub *producer.Publisher, eps []producer.Endpoint, id string,
	data json.RawMessage, inTx bool) ([]string, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `INSERT INTO orders (id, licensee, account, side, created) VALUES ($1, $2, $3, $4, $5)`,
		id, "lic_busy", "acct_bench", "buy", time.Now().Unix()); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(eps))
	if inTx {
		now := time.Now()
		for _, ep := range eps {
			evID := testid.New("evt_")
			if _, err := tx.Exec(ctx, inTxAppend, ep.ID, evID, "order.created", now.Unix(), "v1", []byte(data)); err != nil {
				return nil, err
			}
			ids = append(ids, evID)
		}
	} else {
		evs, err := pub.WithLog(must(pgstore.NewEventLog(tx, nil))).PublishToEach(ctx, eps, "order.created", data)
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			ids = append(ids, ev.ID)
		}
	}
	return ids, tx.Commit(ctx)
}

// waitNumbered returns once want events have been numbered, or fails after a minute.
func waitNumbered(ctx context.Context, log *pgstore.EventLog, mu *sync.Mutex, count *int, want int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		mu.Lock()
		n := *count
		mu.Unlock()
		if n >= want {
			return nil
		}
		if time.Now().After(deadline) {
			left, err := log.Unsequenced(ctx)
			return fmt.Errorf("after a minute %d of %d events were numbered (%d unsequenced, %v)", n, want, left, err)
		}
		time.Sleep(time.Millisecond)
	}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
