package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/internal/testkit/testid"
	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// TestEventLogSequencingUnderFaults is issue 20's proof on real PostgreSQL: 8 writers append 1,000
// events each to one stream, rolling back about a fifth of their transactions, while two replicas'
// sequencers (two EventLogs on two pools) number what commits; one of them has its connection killed
// in the middle of a batch (after the numbering statement, before the commit) every few calls, and
// sometimes fails on its own; a third runs the numbering statement as its own transaction, as
// production does, while its connections are terminated over and over at random moments. The stream ends up numbered exactly 1..committed, each committed event
// once and no rolled-back one, the events of one transaction in their append order; the runs the two
// sequencers reported cover 1..committed exactly once between them, so neither numbered what the
// other did. (That they never hold one stream at once is TestEventLogSequencingReplicasTakeTurns.)
func TestEventLogSequencingUnderFaults(t *testing.T) {
	const (
		writers   = 8
		perWriter = 1000
		stream    = "we_hot"
	)
	ctx := context.Background()
	_, _, opts := newEventLog(t)
	writerPool := fastCommitPool(t)
	// Three replicas' sequencers. logs[0] is killed or fails inside its transaction (the hook below);
	// logs[2] runs as production does — the numbering statement as its own transaction — and a killer
	// terminates its connections at random moments, mid-statement or between statements; logs[1] is
	// left alone.
	chaosName := testid.New("svc-seq-chaos-")
	logs := []*pgstore.EventLog{must(pgstore.NewEventLog(fastCommitPool(t), opts)), must(pgstore.NewEventLog(fastCommitPool(t), opts)),
		must(pgstore.NewEventLog(namedPool(t, chaosName), opts))}

	var calls, kills, aborts atomic.Int64
	pgstore.SetSequenceHook(logs[0], func(ctx context.Context, tx pgx.Tx, runs []driver.SequencedRun) error {
		switch n := calls.Add(1); {
		case len(runs) > 0 && n%5 == 0:
			// A crash mid-batch: the server ends the connection, the transaction rolls back.
			kills.Add(1)
			_, err := tx.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
			if err == nil {
				return errors.New("the backend survived its own termination")
			}
			return err
		case len(runs) > 0 && n%7 == 0:
			aborts.Add(1)
			return errors.New("injected failure before the commit")
		}
		return nil
	})

	// The writers. Each transaction appends one event, every tenth two; a fifth roll back.
	var (
		mu        sync.Mutex
		committed = map[string]bool{}
		together  [][]string // the IDs of each committed two-event transaction, in append order
		writing   sync.WaitGroup
	)
	for w := range writers {
		writing.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 20))
			for i := range perWriter {
				n := 1
				if i%10 == 0 {
					n = 2
				}
				ids, err := appendInTx(ctx, writerPool, opts, stream, n, rng.IntN(5) == 0)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, id := range ids {
					committed[id] = true
				}
				if len(ids) == 2 {
					together = append(together, ids)
				}
				mu.Unlock()
			}
		})
	}

	// The sequencers run until the writers are done and a last call finds nothing.
	var (
		numbered   = map[string]uint64{} // ID → sequence, from the runs Sequence returned
		bySeq      = map[uint64]int{}    // sequence → the sequencer that reported it
		twice      []string
		perLog     [3]int
		chaosErrs  atomic.Int64
		sequencing sync.WaitGroup
		done       atomic.Bool
	)
	for who, l := range logs {
		sequencing.Go(func() {
			for {
				last := done.Load()
				runs, err := l.Sequence(ctx, 64)
				if err != nil && who == 1 {
					t.Errorf("the healthy sequencer failed: %v", err)
					return
				}
				if err != nil && who == 2 {
					chaosErrs.Add(1)
				}
				mu.Lock()
				for _, r := range runs {
					for i, id := range r.IDs {
						seq := r.First + uint64(i)
						if _, ok := numbered[id]; ok {
							twice = append(twice, id)
						}
						if other, ok := bySeq[seq]; ok {
							twice = append(twice, fmt.Sprintf("sequence %d by %d and %d", seq, other, who))
						}
						numbered[id], bySeq[seq] = seq, who
						perLog[who]++
					}
				}
				mu.Unlock()
				if last && err == nil && len(runs) == 0 {
					return
				}
			}
		})
	}
	// The killer: every backend of the chaos sequencer's pool, terminated over and over while the
	// writers write.
	var killed atomic.Int64
	stopKilling := make(chan struct{})
	var killing sync.WaitGroup
	killing.Go(func() {
		for {
			select {
			case <-stopKilling:
				return
			default:
			}
			var n int64
			if err := writerPool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
FROM pg_stat_activity WHERE application_name = $1`, chaosName).Scan(&n); err != nil {
				t.Error(err)
				return
			}
			killed.Add(n)
			runtime.Gosched()
		}
	})
	writing.Wait()
	close(stopKilling)
	killing.Wait()
	done.Store(true)
	sequencing.Wait()
	require.Zero(t, numberAll(t, logs[1]), "the sequencers left nothing behind")

	require.Empty(t, twice, "an event or a sequence was handed out twice")
	require.Positive(t, perLog[0], "the faulty sequencer never committed a batch")
	require.Positive(t, perLog[1])
	require.Positive(t, killed.Load(), "the chaos sequencer's connections were never killed")
	require.Positive(t, chaosErrs.Load(), "no kill ever hit the chaos sequencer in a call")
	require.Positive(t, kills.Load(), "no sequencer was killed mid-batch")
	require.Positive(t, aborts.Load())
	t.Logf("%d events committed of %d+; numbered %d by the faulty sequencer (calls %d, killed %d, failed %d), %d by the healthy one, "+
		"%d by the chaos one (%d connections killed, %d calls failed)",
		len(committed), writers*perWriter, perLog[0], calls.Load(), kills.Load(), aborts.Load(), perLog[1],
		perLog[2], killed.Load(), chaosErrs.Load())

	evs := rangeAllEvents(t, logs[1], stream)
	require.Len(t, evs, len(committed), "every committed event, and nothing else")
	for i, e := range evs {
		require.Equal(t, uint64(i+1), e.Sequence, "gap-free from 1")
		require.True(t, committed[e.ID], "%s was rolled back, yet numbered", e.ID)
		if seq, ok := numbered[e.ID]; ok {
			require.Equal(t, e.Sequence, seq, "the run Sequence returned agrees with the log")
		}
	}
	// A call whose connection died after its commit returns an error though it numbered its batch:
	// those events are in the log all the same, only unreported.
	unreported := len(committed) - len(numbered)
	require.GreaterOrEqual(t, unreported, 0)
	t.Logf("%d events numbered by calls whose answer was lost", unreported)
	inLog := make(map[string]uint64, len(evs))
	for _, e := range evs {
		inLog[e.ID] = e.Sequence
	}
	for _, pair := range together {
		require.Less(t, inLog[pair[0]], inLog[pair[1]], "one transaction's events in append order")
	}
	var pending int
	require.NoError(t, writerPool.QueryRow(ctx, `SELECT count(*) FROM "`+opts.Schema+`"."webhook_events_pending"`).Scan(&pending))
	require.Zero(t, pending)
}

// namedPool is a pool on the test database whose connections carry application_name, so that a test
// can find and terminate them.
func namedPool(t testing.TB, name string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["application_name"] = name
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// appendInTx appends n events to stream in one transaction and commits it, or rolls it back. It
// returns the IDs that committed.
func appendInTx(ctx context.Context, db pgstore.DB, opts *pgstore.EventLogOptions, stream string, n int, rollback bool) ([]string, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	l := must(pgstore.NewEventLog(tx, opts))
	ids := make([]string, 0, n)
	for range n {
		e, err := l.Append(ctx, driver.StreamEvent{Stream: stream, Event: evlogEvent("order.created")})
		if err != nil {
			return nil, err
		}
		ids = append(ids, e.ID)
	}
	if rollback {
		return nil, tx.Rollback(ctx)
	}
	return ids, tx.Commit(ctx)
}

func rangeAllEvents(t *testing.T, l driver.Log, stream string) []producerEvent {
	t.Helper()
	var out []producerEvent
	for from := uint64(1); ; {
		page, more, err := l.Range(context.Background(), stream, from, 1<<62, producer.MaxRangeLimit)
		require.NoError(t, err)
		for _, e := range page {
			out = append(out, producerEvent{ID: e.ID, Sequence: e.Sequence})
		}
		if !more {
			return out
		}
		from = page[len(page)-1].Sequence + 1
	}
}

type producerEvent struct {
	ID       string
	Sequence uint64
}

// TestEventLogSequencingReplicasTakeTurns: while one replica's sequencer is inside its transaction for
// a stream, another replica's sequencer numbers other streams but not that one — not the events it is
// numbering, nor events appended since — and takes the stream up after it, where it left off.
func TestEventLogSequencingReplicasTakeTurns(t *testing.T) {
	ctx := context.Background()
	_, _, opts := newEventLog(t)
	a, b := must(pgstore.NewEventLog(fastCommitPool(t), opts)), must(pgstore.NewEventLog(fastCommitPool(t), opts))
	inside, release := make(chan []driver.SequencedRun), make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // a failing test must not leave a stuck in its transaction
	pgstore.SetSequenceHook(a, func(_ context.Context, _ pgx.Tx, runs []driver.SequencedRun) error {
		inside <- runs
		<-release
		return nil
	})
	appendN := func(stream string, n int) []string {
		ids := make([]string, n)
		for i := range ids {
			e, err := a.Append(ctx, driver.StreamEvent{Stream: stream, Event: evlogEvent("order.created")})
			require.NoError(t, err)
			ids[i] = e.ID
		}
		return ids
	}
	a1 := appendN("we_a", 5)
	b1 := appendN("we_b", 3)

	type result struct {
		runs []driver.SequencedRun
		err  error
	}
	aDone := make(chan result, 1)
	go func() {
		runs, err := a.Sequence(ctx, 5) // the five oldest: we_a's
		aDone <- result{runs, err}
	}()
	require.Equal(t, []driver.SequencedRun{{Stream: "we_a", First: 1, IDs: a1}}, <-inside)

	// a holds we_a's numbering lock until it commits. b must not wait for it: a b that did would block
	// on a's rows until this deadline.
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	runs, err := b.Sequence(bctx, 100)
	require.NoError(t, err)
	require.Equal(t, []driver.SequencedRun{{Stream: "we_b", First: 1, IDs: b1}}, runs, "b numbers we_b, not we_a")
	a2 := appendN("we_a", 3)
	runs, err = b.Sequence(bctx, 100)
	require.NoError(t, err)
	require.Empty(t, runs, "we_a's new events wait for a's turn to end")

	free()
	got := <-aDone
	require.NoError(t, got.err)
	require.Equal(t, []driver.SequencedRun{{Stream: "we_a", First: 1, IDs: a1}}, got.runs)
	runs, err = b.Sequence(ctx, 100)
	require.NoError(t, err)
	require.Equal(t, []driver.SequencedRun{{Stream: "we_a", First: 6, IDs: a2}}, runs, "b goes on where a left off")
	require.Equal(t, []uint64{1, 2, 3, 4, 5, 6, 7, 8}, evlogSeqs(t, b, "we_a"))
	require.True(t, slices.Equal([]uint64{1, 2, 3}, evlogSeqs(t, b, "we_b")))
}
