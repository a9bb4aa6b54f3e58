package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// Redeliver racing retention never queues a removed event: it locks the stream's row and reads the
// watermark the cleanup left, so no redelivery row outlives its event (one would be claimed for an
// event that is gone). Checked on the tables themselves, after recoveries and cleanups of one stream
// raced each other from two pools.
func TestEventLogRedeliverRacesRetention(t *testing.T) {
	ctx := context.Background()
	_, pool, opts := newEventLog(t)
	l := must(pgstore.NewEventLog(pool, opts))
	other := must(pgstore.NewEventLog(fastCommitPool(t), opts))
	const events = 300
	batch := make([]driver.StreamEvent, events)
	for i := range batch {
		e := evlogEvent("order.created")
		e.Created = evlogT0.Add(time.Duration(i) * time.Second).Unix()
		batch[i] = driver.StreamEvent{Stream: "we_a", Event: e}
	}
	_, err := l.AppendBatch(ctx, batch)
	require.NoError(t, err)
	numberAll(t, l)
	now := evlogT0.Add(time.Hour)
	for {
		ds, err := l.Claim(ctx, driver.ClaimRequest{Now: now, LeaseUntil: now.Add(time.Hour), Limit: 100})
		require.NoError(t, err)
		if len(ds) == 0 {
			break
		}
		ss := make([]driver.Settlement, len(ds))
		for i, d := range ds {
			ss[i] = driver.Settlement{Lease: d.Lease, Delivered: true, Attempt: driver.Attempt{At: now}}
		}
		for _, err := range l.Settle(ctx, ss) {
			require.NoError(t, err)
		}
	}

	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Go(func() { // recoveries of the whole stream, from its first retained event up
		for range 60 {
			from := uint64(1)
			for {
				_, err := other.Redeliver(ctx, "we_a", from, events, now)
				var pe *driver.PrunedError
				if errors.As(err, &pe) {
					from = pe.FirstRetained
					if from > events {
						return
					}
					continue
				}
				if err != nil {
					errs[0] = err
					return
				}
				break
			}
		}
	})
	wg.Go(func() { // retention, a few events at a time
		for s := 1; s <= events; s += 5 {
			if _, err := l.Cleanup(ctx, evlogT0.Add(time.Duration(s)*time.Second), 5); err != nil {
				errs[1] = err
				return
			}
		}
	})
	wg.Wait()
	require.NoError(t, errors.Join(errs...))

	var orphans int
	require.NoError(t, pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s r
		WHERE NOT EXISTS (SELECT 1 FROM %s e WHERE e.stream = r.stream AND e.seq = r.seq)`,
		pgx.Identifier{opts.Schema, pgstore.DefaultEventLogTable + "_redeliveries"}.Sanitize(),
		pgx.Identifier{opts.Schema, pgstore.DefaultEventLogTable}.Sanitize()),
	).Scan(&orphans))
	require.Zero(t, orphans, "queued redeliveries of removed events")
	ds, err := l.Claim(ctx, driver.ClaimRequest{Now: now, LeaseUntil: now.Add(time.Hour), Limit: 1000})
	require.NoError(t, err)
	for _, d := range ds {
		require.True(t, d.Redelivery)
	}
	evs, _, err := l.Range(ctx, "we_a", 1, events, 1000)
	var pe *driver.PrunedError
	if errors.As(err, &pe) {
		evs, _, err = l.Range(ctx, "we_a", pe.FirstRetained, events, 1000)
	}
	require.NoError(t, err)
	require.LessOrEqual(t, len(ds), len(evs), "claimed redeliveries of retained events only")
}
