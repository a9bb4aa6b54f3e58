package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// TestEventLogLowWaterWaitsForOpenTransaction: the sequencer's low-water mark never passes a
// transaction that is still open, however many events other transactions append and have numbered
// meanwhile, so the open transaction's events are numbered once it commits.
func TestEventLogLowWaterWaitsForOpenTransaction(t *testing.T) {
	ctx := context.Background()
	l, pool, opts := newEventLog(t)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = must(pgstore.NewEventLog(tx, opts)).Append(ctx, driver.StreamEvent{Stream: "we_slow", Event: evlogEvent("order.created")})
	require.NoError(t, err)
	for range 5 {
		for range 20 {
			_, err := l.Append(ctx, driver.StreamEvent{Stream: "we_fast", Event: evlogEvent("order.created")})
			require.NoError(t, err)
		}
		_, err := l.Sequence(ctx, 1000)
		require.NoError(t, err)
	}
	require.Empty(t, evlogSeqs(t, l, "we_slow"), "not committed yet")
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, 1, numberAll(t, l))
	require.Equal(t, []uint64{1}, evlogSeqs(t, l, "we_slow"))
	require.Len(t, evlogSeqs(t, l, "we_fast"), 100)
}

// TestEventLogCostStaysFlat: after a stream's events are appended, numbered, delivered and removed
// by retention — tens of thousands of deleted rows in every queue table, and no VACUUM (autovacuum
// may be off) — the sequencer's numbering, a claim and a retention batch read about as many pages as
// they do after a hundred: they never walk the rows deleted before. (In between, at a few thousand
// deleted rows, the planner may prefer to read the small pending table whole: a hundred pages.)
func TestEventLogCostStaysFlat(t *testing.T) {
	small := churnBuffers(t, 100)
	large := churnBuffers(t, 30000)
	for name, n := range large {
		if name == "cleanup_delete" {
			// One index scan for each of 64 streams, in each table: a page or two per level of the
			// index, which grows by one level for a hundred times the rows.
			require.LessOrEqual(t, n, int64(64*3), "%s: %d pages after 30000 events", name, n)
			continue
		}
		require.LessOrEqual(t, n, small[name]+8, "%s: %d pages after 30000 events, %d after 100", name, n, small[name])
	}
}

// churnBuffers runs n events of one stream through a fresh log — appended, numbered, claimed,
// delivered, removed — and returns the pages (shared buffers hit or read) that each hot statement
// then reads, from EXPLAIN (ANALYZE, BUFFERS) in a transaction rolled back.
func churnBuffers(t *testing.T, n int) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	l, pool, opts := newEventLog(t)
	created := time.Unix(1767225600, 0)
	for done := 0; done < n; {
		batch := make([]driver.StreamEvent, min(500, n-done))
		for i := range batch {
			batch[i] = driver.StreamEvent{Stream: "we_churn", Event: webhook.Event{Type: "order.created", Created: created.Unix(),
				APIVersion: "v1", Data: json.RawMessage(`{"n":1}`)}}
		}
		_, err := l.AppendBatch(ctx, batch)
		require.NoError(t, err)
		done += len(batch)
	}
	require.Equal(t, n, numberAll(t, l))
	now := created.Add(time.Hour)
	for delivered := 0; delivered < n; {
		ds, err := l.Claim(ctx, driver.ClaimRequest{Now: now, LeaseUntil: now.Add(time.Minute), Limit: 500, PerStream: 500})
		require.NoError(t, err)
		require.NotEmpty(t, ds)
		ss := make([]driver.Settlement, len(ds))
		for i, d := range ds {
			ss[i] = driver.Settlement{Lease: d.Lease, Delivered: true, Attempt: driver.Attempt{At: now}}
		}
		for _, err := range l.Settle(ctx, ss) {
			require.NoError(t, err)
		}
		delivered += len(ds)
	}
	// One more event, numbered and due: the claim has something to take.
	_, err := l.Append(ctx, driver.StreamEvent{Stream: "we_churn", Event: evlogEvent("order.created")})
	require.NoError(t, err)
	require.Equal(t, 1, numberAll(t, l))
	for {
		k, err := l.Cleanup(ctx, created.Add(time.Second), 1000)
		require.NoError(t, err)
		if k == 0 {
			break
		}
	}
	out := map[string]int64{}
	out["sequence"] = explainBuffers(t, pool, pgstore.EventLogStatement(l, "sequence"), int64(1000),
		int32(pgstore.SequenceLockClass), "x#", pgstore.LowWater(l))
	out["claim"] = explainBuffers(t, pool, pgstore.EventLogStatement(l, "claim"), []string{"we_churn"}, now, int64(10),
		now.Unix(), now.Add(time.Minute), int64(10))
	out["cleanup_pick"] = explainBuffers(t, pool, pgstore.EventLogStatement(l, "cleanup_pick"), created.Add(time.Second).Unix(),
		int64(1000), int64(64), int64(1000), int64(32))
	// A batch's delete over 64 streams: planned from a 64-row list, which would make a hash join of
	// the whole table look cheaper than 64 index scans.
	var pruned int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT pruned_through FROM `+pgx.Identifier{opts.Schema, "webhook_events_streams"}.Sanitize()+
		` WHERE stream = 'we_churn'`).Scan(&pruned))
	streams, after, through, first := []string{"we_churn"}, []int64{pruned}, []int64{pruned + 1}, []*int64{nil}
	for i := range 63 {
		streams, after, through, first = append(streams, fmt.Sprintf("we_none%02d", i)), append(after, 0), append(through, 1_000_000), append(first, nil)
	}
	out["cleanup_delete"] = explainBuffers(t, pool, pgstore.EventLogStatement(l, "cleanup_delete"), streams, after, through, first)
	return out
}

// explainBuffers runs sql under EXPLAIN (ANALYZE, BUFFERS) in a transaction it rolls back, and
// returns the shared pages its plan hit or read.
func explainBuffers(t *testing.T, pool pgstore.DB, sql string, args ...any) int64 {
	t.Helper()
	require.NotEmpty(t, sql)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var plan []struct {
		Plan map[string]any `json:"Plan"`
	}
	var raw []byte
	require.NoError(t, tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args...).Scan(&raw))
	require.NoError(t, json.Unmarshal(raw, &plan))
	require.Len(t, plan, 1)
	var n int64
	for _, k := range []string{"Shared Hit Blocks", "Shared Read Blocks"} {
		v, ok := plan[0].Plan[k].(float64)
		require.True(t, ok, fmt.Sprintf("%s in %s", k, raw))
		n += int64(v)
	}
	return n
}

// TestEventLogCleanupSkewedStreams: retention reads each stream it looks at for its share of the
// batch, so a batch over more streams than it looks at, or over streams of very different sizes,
// still removes every expired event, never more than the limit per batch, and never one that is
// not expired; the few streams that hold most of the expired events are read alone once the others
// are done, so the batches stay close to full.
func TestEventLogCleanupSkewedStreams(t *testing.T) {
	ctx := context.Background()
	l, _, _ := newEventLog(t)
	const (
		small = 70  // streams with one expired event and one retained: more than a batch looks at
		big   = 500 // the expired events of the one big stream
		limit = 100
	)
	expired, retained := evlogT0, evlogT0.Add(2*time.Hour)
	var evs []driver.StreamEvent
	add := func(stream string, created time.Time) {
		e := evlogEvent("order.created")
		e.Created = created.Unix()
		evs = append(evs, driver.StreamEvent{Stream: stream, Event: e})
	}
	for i := range small {
		add(fmt.Sprintf("we_small_%02d", i), expired)
		add(fmt.Sprintf("we_small_%02d", i), retained)
	}
	for i := range big {
		// Younger than the small streams' expired events, so a batch looks at those first.
		add("we_big", expired.Add(time.Duration(1+i)*time.Second))
	}
	add("we_big", retained)
	_, err := l.AppendBatch(ctx, evs)
	require.NoError(t, err)
	require.Equal(t, len(evs), numberAll(t, l))

	before := evlogT0.Add(time.Hour)
	var batches []int
	for {
		n, err := l.Cleanup(ctx, before, limit)
		require.NoError(t, err)
		if n == 0 {
			break
		}
		require.LessOrEqual(t, n, limit, "batch %d", len(batches)+1)
		batches = append(batches, n)
		require.Less(t, len(batches), 20, "the cleanup does not converge: %v", batches)
	}
	total := 0
	for _, n := range batches {
		total += n
	}
	t.Logf("batches: %v", batches)
	require.Equal(t, small+big, total, "every expired event, and no retained one: %v", batches)
	// The first batch looks at 64 small streams, the second at the 6 left and the big one, and the
	// rest at the big one alone, whole batches: one batch more than the fewest possible.
	require.LessOrEqual(t, len(batches), (small+big+limit-1)/limit+1, "batches: %v", batches)
	retainedOnly := func(stream string, seq uint64) {
		t.Helper()
		_, _, err := l.Range(ctx, stream, seq-1, seq-1, 1)
		require.ErrorIs(t, err, driver.ErrPruned, stream)
		got, more, err := l.Range(ctx, stream, seq, math.MaxUint64, 10)
		require.NoError(t, err)
		require.False(t, more)
		require.Len(t, got, 1, stream)
		require.Equal(t, seq, got[0].Sequence, stream)
	}
	for i := range small {
		retainedOnly(fmt.Sprintf("we_small_%02d", i), 2)
	}
	retainedOnly("we_big", big+1)
}
