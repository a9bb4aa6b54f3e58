package producer

import (
	"errors"
	"testing"
	"time"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer/driver"
)

// TestChecksKeepTheDriverContract: what the producer refuses before it calls a Log — the
// arguments the driver contract says a Log never sees. (These checks were the logs' own before
// the contract moved them here.)
func TestChecksKeepTheDriverContract(t *testing.T) {
	ev := func(typ, data string) webhook.Event { return webhook.Event{Type: typ, Data: []byte(data)} }
	for name, err := range map[string]error{
		"empty stream":     checkEvent("", ev("order.created", `{}`)),
		"empty type":       checkEvent("we_a", ev("", `{}`)),
		"nil data":         checkEvent("we_a", webhook.Event{Type: "order.created"}),
		"invalid JSON":     checkEvent("we_a", ev("order.created", `{"a":`)),
		"trailing garbage": checkEvent("we_a", ev("order.created", `{} x`)),
	} {
		if !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("%s: got %v, want ErrInvalidEvent", name, err)
		}
	}
	if err := checkEvent("we_a", ev("order.created", `{}`)); err != nil {
		t.Errorf("a valid event: %v", err)
	}
	for name, err := range map[string]error{
		"from zero":           checkRange(0, 3, 10),
		"to below from":       checkRange(3, 2, 10),
		"limit zero":          checkRange(1, 3, 0),
		"limit negative":      checkRange(1, 3, -1),
		"a budget of 0":       checkRangeBytes(1, 2, 10, 0),
		"bytes from 0":        checkRangeBytes(0, 2, 10, 100),
		"attempts, no stream": checkAttemptQuery(driver.AttemptQuery{Limit: 1}),
		"attempts, no limit":  checkAttemptQuery(driver.AttemptQuery{Stream: "we_a"}),
	} {
		if !errors.Is(err, ErrInvalidRange) {
			t.Errorf("%s: got %v, want ErrInvalidRange", name, err)
		}
	}
	if err := checkRangeBytes(1, 1, 1, 1); err != nil {
		t.Errorf("the smallest valid range: %v", err)
	}
	for _, tc := range []struct{ in, want time.Time }{
		{time.Unix(5, 0), time.Unix(5, 0)},
		{time.Unix(5, int64(time.Millisecond)), time.Unix(6, 0)}, // an event of second 5 is before 5.001
		{time.Unix(-1, 1), time.Unix(0, 0)},
	} {
		if got := cutoff(tc.in); !got.Equal(tc.want) {
			t.Errorf("cutoff(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if got := outcomeOf(false, driver.Attempt{}); got != driver.OutcomeAbandoned {
		t.Errorf("a failure without a retry: %v", got)
	}
}
