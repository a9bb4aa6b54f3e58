package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/pgstore/internal/pgtest"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// BenchmarkEventLogSettleStats: one Settle call as the Dispatcher's group commit makes it, 64 deliveries
// of 64 streams, delivered; without the statistics' trigger (the tables as migration 4 left them)
// and with it, for its cost.
func BenchmarkEventLogSettleStats(b *testing.B) {
	const streams, per = 64, 200
	for _, stats := range []bool{false, true} {
		b.Run(fmt.Sprintf("stats=%t", stats), func(b *testing.B) {
			ctx := context.Background()
			pool, schema := pgtest.Pool(b)
			opts := &pgstore.EventLogOptions{Schema: schema}
			if stats {
				require.NoError(b, pgstore.Migrate(ctx, pool, opts))
			} else {
				require.NoError(b, pgstore.MigrateUpTo(ctx, pool, 4, opts))
			}
			l := must(pgstore.NewEventLog(pool, opts))
			ev := webhook.Event{Type: "order.created", Created: evlogT0.Unix(), APIVersion: "v1", Data: evlogBenchData}
			fill := func() {
				batch := make([]driver.StreamEvent, 0, streams*per)
				for s := range streams {
					for range per {
						batch = append(batch, driver.StreamEvent{Stream: fmt.Sprintf("we_%d", s), Event: ev})
					}
				}
				_, err := l.AppendBatch(ctx, batch)
				require.NoError(b, err)
				numberAll(b, l)
			}
			fill()
			now := evlogT0.Add(time.Hour)
			ss := make([]driver.Settlement, 0, streams)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				ds, err := l.Claim(ctx, driver.ClaimRequest{Now: now, LeaseUntil: now.Add(time.Minute), Limit: streams, PerStream: 1})
				require.NoError(b, err)
				if len(ds) < streams {
					fill()
					ds, err = l.Claim(ctx, driver.ClaimRequest{Now: now, LeaseUntil: now.Add(time.Minute), Limit: streams, PerStream: 1})
					require.NoError(b, err)
				}
				ss = ss[:0]
				for _, d := range ds {
					ss = append(ss, driver.Settlement{Lease: d.Lease, Delivered: true,
						Attempt: driver.Attempt{At: now, Latency: 42 * time.Millisecond, StatusCode: 200}})
				}
				b.StartTimer()
				for _, err := range l.Settle(ctx, ss) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkStreamStats reads one stream's statistics after 10,000 and after 1,000,000 attempts
// recorded through the real claim and Settle path (each round claims every event of the stream and
// fails it, due again at once, in one Settle call; the last round delivers them all, so that no
// backlog stands), spread evenly over the 8 days before the read. Both streams share one log, so
// the history table holds 1,010,000 attempts for the second read. The cost must not grow with the
// history. Building the history takes a couple of minutes; it runs only with -bench.
func BenchmarkStreamStats(b *testing.B) {
	ctx := context.Background()
	l, _, _ := newEventLog(b)
	now := evlogT0.Add(30 * 24 * time.Hour)
	grow := func(stream string, events, attempts int) {
		b.Helper()
		ev := webhook.Event{Type: "order.created", Created: evlogT0.Unix(), APIVersion: "v1", Data: evlogBenchData}
		batch := make([]driver.StreamEvent, events)
		for i := range batch {
			batch[i] = driver.StreamEvent{Stream: stream, Event: ev}
		}
		_, err := l.AppendBatch(ctx, batch)
		require.NoError(b, err)
		numberAll(b, l)
		step := 8 * 24 * time.Hour / time.Duration(attempts)
		at := now.Add(-8 * 24 * time.Hour)
		ss := make([]driver.Settlement, 0, events)
		for made := 0; made < attempts; {
			ds, err := l.Claim(ctx, driver.ClaimRequest{Now: now, LeaseUntil: now.Add(time.Hour), Limit: events, PerStream: events})
			require.NoError(b, err)
			require.Len(b, ds, events)
			last := attempts-made <= events
			ss = ss[:0]
			for i, d := range ds {
				a := driver.Attempt{At: at, Latency: time.Duration(1+i%500) * time.Millisecond}
				if !last {
					a.StatusCode, a.Reason, a.RetryAt = 503, "status 503", now
				}
				ss = append(ss, driver.Settlement{Lease: d.Lease, Delivered: last, Attempt: a})
				at = at.Add(step)
			}
			for _, err := range l.Settle(ctx, ss) {
				require.NoError(b, err)
			}
			made += len(ds)
		}
	}
	for _, size := range []struct {
		stream           string
		events, attempts int
	}{{"we_small", 1000, 10_000}, {"we_big", 5000, 1_000_000}} {
		start := time.Now()
		grow(size.stream, size.events, size.attempts)
		built := time.Since(start)
		b.Run(fmt.Sprintf("attempts=%d", size.attempts), func(b *testing.B) {
			b.ReportMetric(built.Seconds(), "setup-s")
			var st driver.StreamStats
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if st, err = l.StreamStats(ctx, size.stream, now); err != nil {
					b.Fatal(err)
				}
			}
			// Eight days of attempts: the week holds seven eighths of them, the day one eighth.
			require.InDelta(b, float64(size.attempts)*7/8, st.Week.Attempts(), float64(size.attempts)/100, "the week's attempts")
			require.InDelta(b, float64(size.attempts)/8, st.Day.Attempts(), float64(size.attempts)/100, "the day's attempts")
			require.Zero(b, st.Backlog)
			b.ReportMetric(float64(st.Week.Attempts()), "week-attempts")
		})
	}
}
