package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync/atomic"
	"testing"

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
