package memstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// A range below the retained window fails with a *PrunedError that names the first retained event.
func ExampleLog_Range() {
	ctx := context.Background()
	log := memstore.NewLog()
	var seqs []uint64
	for i := range 4 {
		ev, _ := log.Append(ctx, driver.StreamEvent{Stream: "we_123", Event: webhook.Event{Type: "order.created", Created: int64(1000 + i), Data: json.RawMessage(`{}`)}})
		seqs = append(seqs, ev.Sequence)
	}
	fmt.Println(seqs)
	events, more, _ := log.Range(ctx, "we_123", 2, 4, 2)
	fmt.Println(len(events), events[0].Sequence, events[1].Sequence, more)

	_, _ = log.Cleanup(ctx, time.Unix(1002, 0), 100) // events created before second 1002
	_, _, err := log.Range(ctx, "we_123", 1, 4, 10)
	var pruned *driver.PrunedError
	fmt.Println(errors.Is(err, driver.ErrPruned), errors.As(err, &pruned) && pruned.FirstRetained == 3)
	// Output:
	// [1 2 3 4]
	// 2 2 3 true
	// true true
}
