package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcplatform/conventions/pgstore"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

var evlogBenchData = json.RawMessage(`{"id":"ord_2x7kq","account":"acc_91","side":"buy","qty":"12.5000","price":"101.25","currency":"EUR"}`)

// BenchmarkEventLogAppend appends from 8 goroutines on the default pool (synchronous_commit on, as in
// production): into one stream and into 8 streams, one per goroutine. Appends lock no shared row
// (they are numbered after they commit), so one stream appends as fast as eight.
func BenchmarkEventLogAppend(b *testing.B) {
	for _, streams := range []int{1, 8} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			l, _, _ := newEventLog(b)
			var next atomic.Int64
			ev := webhook.Event{Type: "order.created", Created: evlogT0.Unix(), APIVersion: "v1", Data: evlogBenchData}
			b.ReportAllocs()
			b.SetParallelism(4) // 8 goroutines on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				stream := fmt.Sprintf("we_%d", next.Add(1)%int64(streams))
				ctx := context.Background()
				for pb.Next() {
					if _, err := l.Append(ctx, driver.StreamEvent{Stream: stream, Event: ev}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

func BenchmarkEventLogRange1000(b *testing.B) {
	l, _, _ := newEventLog(b)
	ctx := context.Background()
	ev := webhook.Event{Type: "order.created", Created: evlogT0.Unix(), APIVersion: "v1", Data: evlogBenchData}
	for range 3000 {
		if _, err := l.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: ev}); err != nil {
			b.Fatal(err)
		}
	}
	numberAll(b, l)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		evs, more, err := l.Range(ctx, "we_a", 1001, math.MaxUint64, 1000)
		if err != nil || len(evs) != 1000 || !more {
			b.Fatal(err, len(evs), more)
		}
	}
}

// BenchmarkEventLogSettle times Settle on the common path: deliveries claimed in order and settled
// delivered, batch at a time in one call (batch=1: a dispatcher at low load; batch=32: its group
// commit under load), one delivery per stream, so each settlement moves a stream's cursor. The claim
// that leases them is not timed. On a pool with synchronous_commit off: the WAL flush at commit costs
// every statement the same and, on a test machine's disk, varies more than the statement costs.
func BenchmarkEventLogSettle(b *testing.B) {
	const streams, perStream = 32, 200
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			_, _, opts := newEventLog(b)
			l := must(pgstore.NewEventLog(fastCommitPool(b), opts))
			ctx := context.Background()
			ev := webhook.Event{Type: "order.created", Created: evlogT0.Unix(), APIVersion: "v1", Data: evlogBenchData}
			refill := func() {
				evs := make([]driver.StreamEvent, 0, streams*perStream)
				for i := range streams * perStream {
					evs = append(evs, driver.StreamEvent{Stream: fmt.Sprintf("we_%02d", i%streams), Event: ev})
				}
				if _, err := l.AppendBatch(ctx, evs); err != nil {
					b.Fatal(err)
				}
				numberAll(b, l)
			}
			now := evlogT0.Add(time.Hour)
			claim := driver.ClaimRequest{Now: now, LeaseUntil: now.Add(time.Hour), Limit: batch, PerStream: 1}
			ss := make([]driver.Settlement, batch)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				ds, err := l.Claim(ctx, claim)
				if err == nil && len(ds) < batch {
					refill()
					ds, err = l.Claim(ctx, claim)
				}
				if err != nil || len(ds) != batch {
					b.Fatal(err, len(ds))
				}
				for i, d := range ds {
					ss[i] = driver.Settlement{Lease: d.Lease, Delivered: true, Attempt: driver.Attempt{At: now, StatusCode: 200}}
				}
				b.StartTimer()
				for i, err := range l.Settle(ctx, ss) {
					if err != nil {
						b.Fatal(i, err)
					}
				}
			}
		})
	}
}

// BenchmarkEventLogClaim times Claim on the common path: 32 streams with events due and nothing
// queued for redelivery, each claim taking perStream deliveries of each (Limit 32×perStream), which
// the untimed Settle after it delivers. On a pool with synchronous_commit off, as
// BenchmarkEventLogSettle.
func BenchmarkEventLogClaim(b *testing.B) {
	const streams, perStreamEvents = 32, 200
	for _, per := range []int{1, 8} {
		b.Run(fmt.Sprintf("perStream=%d", per), func(b *testing.B) {
			_, _, opts := newEventLog(b)
			l := must(pgstore.NewEventLog(fastCommitPool(b), opts))
			ctx := context.Background()
			ev := webhook.Event{Type: "order.created", Created: evlogT0.Unix(), APIVersion: "v1", Data: evlogBenchData}
			refill := func() {
				evs := make([]driver.StreamEvent, 0, streams*perStreamEvents)
				for i := range streams * perStreamEvents {
					evs = append(evs, driver.StreamEvent{Stream: fmt.Sprintf("we_%02d", i%streams), Event: ev})
				}
				if _, err := l.AppendBatch(ctx, evs); err != nil {
					b.Fatal(err)
				}
				numberAll(b, l)
			}
			now := evlogT0.Add(time.Hour)
			want := streams * per
			claim := driver.ClaimRequest{Now: now, LeaseUntil: now.Add(time.Hour), Limit: want, PerStream: per}
			refill()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				ds, err := l.Claim(ctx, claim)
				if err != nil || len(ds) != want {
					b.Fatal(err, len(ds))
				}
				b.StopTimer()
				ss := make([]driver.Settlement, len(ds))
				for i, d := range ds {
					ss[i] = driver.Settlement{Lease: d.Lease, Delivered: true, Attempt: driver.Attempt{At: now, StatusCode: 200}}
				}
				for i, err := range l.Settle(ctx, ss) {
					if err != nil {
						b.Fatal(i, err)
					}
				}
				if ds[0].Sequence+uint64(2*per) > perStreamEvents {
					refill()
				}
				b.StartTimer()
			}
		})
	}
}
