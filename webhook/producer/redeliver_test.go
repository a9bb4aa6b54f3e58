package producer_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// A Dispatcher delivers the redeliveries a Redeliverer queued like any delivery: behind the stream's
// normal deliveries, in sequence order, with the same body bytes and sequence under a fresh
// signature, on a retry schedule that starts over, and without changing the events' own state.
func TestDispatcherDeliversRedeliveries(t *testing.T) {
	ctx := context.Background()
	// Event 2 fails at its first delivery and at its first redelivery.
	sk, srv := startSink(t, func(ev webhook.Event, n int) int {
		if ev.Sequence == 2 && (n == 0 || n == 2) {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	secret := webhook.NewSecret()
	eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: srv.URL, Owner: "lic_1", Secrets: []string{secret}})
	l := memstore.NewLog()
	clk := newClock()
	d := mustDispatcher(t, l, eps, &producer.DispatcherOptions{Now: clk.Now, Jitter: -1,
		Schedule: []time.Duration{time.Minute, time.Hour}})
	deliver := func(want producer.Stats) {
		t.Helper()
		st, err := d.DeliverDue(ctx)
		require.NoError(t, err)
		require.Equal(t, want, st)
	}

	publishN(t, l, "we_a", 3, t0)
	deliver(producer.Stats{Claimed: 3, Delivered: 1, Failed: 1, Released: 1})
	clk.Advance(time.Minute)
	deliver(producer.Stats{Claimed: 2, Delivered: 2})
	firstTime := map[uint64]driver.DeliveryStatus{}
	for seq := uint64(1); seq <= 3; seq++ {
		firstTime[seq] = status(t, l, "we_a", seq)
		require.Equal(t, driver.Delivered, firstTime[seq].State)
	}

	// Two new events, and a support engineer's resend of everything.
	publishN(t, l, "we_a", 2, clk.Now())
	n, err := l.Redeliver(ctx, "we_a", 1, 100, clk.Now())
	require.NoError(t, err)
	require.Equal(t, 3, n, "the delivered events; 4 and 5 are pending")

	deliver(producer.Stats{Claimed: 2, Delivered: 2}) // 4 and 5: the normal stream goes first
	clk.Advance(time.Second)
	redeliveredAt := clk.Now()
	deliver(producer.Stats{Claimed: 3, Delivered: 1, Failed: 1, Released: 1})
	clk.Advance(time.Minute)
	deliver(producer.Stats{Claimed: 2, Delivered: 2})
	deliver(producer.Stats{})

	got := sk.deliveries()
	var order []uint64
	first := map[uint64][]byte{}
	for _, dl := range got {
		seq := dl.Event.Sequence
		order = append(order, seq)
		require.Equal(t, strconv.FormatUint(seq, 10), dl.Header.Get(webhook.HeaderSequence))
		if b, ok := first[seq]; ok {
			require.Equal(t, string(b), string(dl.Body), "event %d is sent again byte for byte", seq)
		} else {
			first[seq] = dl.Body
		}
	}
	require.Equal(t, []uint64{1, 2, 2, 3, 4, 5, 1, 2, 2, 3}, order)
	// A fresh signature, at the time of the redelivery.
	checkSignature(t, got[6].Signature, got[6].Body, redeliveredAt, secret)

	hist, _, err := l.Attempts(ctx, driver.AttemptQuery{Stream: "we_a", Sequence: 2, Limit: 10})
	require.NoError(t, err)
	require.Len(t, hist, 4)
	require.Equal(t, []int{4, 3, 2, 1}, []int{hist[0].Number, hist[1].Number, hist[2].Number, hist[3].Number})
	require.Equal(t, driver.OutcomeFailed, hist[1].Outcome)
	require.Equal(t, time.Minute, hist[1].RetryAt.Sub(hist[1].At),
		"the redelivery's first failure waits the schedule's first delay, not its second")
	for seq := uint64(1); seq <= 3; seq++ {
		st := status(t, l, "we_a", seq)
		require.Equal(t, firstTime[seq].State, st.State, "event %d", seq)
		require.Equal(t, firstTime[seq].Attempts, st.Attempts, "event %d", seq)
		require.True(t, firstTime[seq].DeliveredAt.Equal(st.DeliveredAt), "event %d", seq)
	}
}
