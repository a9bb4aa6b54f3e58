package producer_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

func TestPublisher(t *testing.T) {
	ctx := context.Background()
	eps := mustEndpoints(t, producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	clk := newClock()
	l := memstore.NewLog()
	pub := mustPublisher(t, l, eps, &producer.PublisherOptions{Now: clk.Now})

	t.Run("stamps the envelope", func(t *testing.T) {
		ev, err := pub.Publish(ctx, "we_a", "order.created", struct {
			ID  string `json:"id"`
			Qty int    `json:"qty"`
		}{"ord_1", 3})
		require.NoError(t, err)
		require.Regexp(t, `^evt_[a-z2-7]{26}$`, ev.ID)
		require.Equal(t, uint64(1), ev.Sequence)
		require.Equal(t, "order.created", ev.Type)
		require.Equal(t, t0.Unix(), ev.Created)
		require.Equal(t, producer.DefaultAPIVersion, ev.APIVersion)
		require.JSONEq(t, `{"id":"ord_1","qty":3}`, string(ev.Data))
	})
	t.Run("raw JSON is stored as it is", func(t *testing.T) {
		for _, data := range []any{json.RawMessage(`{"b": 1,  "a": 2}`), []byte(`{"b": 1,  "a": 2}`)} {
			ev, err := pub.Publish(ctx, "we_a", "order.created", data)
			require.NoError(t, err)
			got, _, err := l.Range(ctx, "we_a", ev.Sequence, ev.Sequence, 1)
			require.NoError(t, err)
			require.Equal(t, `{"b": 1,  "a": 2}`, string(got[0].Data))
		}
	})
	t.Run("refusals", func(t *testing.T) {
		_, err := pub.Publish(ctx, "we_nope", "order.created", nil)
		require.ErrorIs(t, err, producer.ErrUnknownEndpoint)
		_, err = pub.Publish(ctx, "we_a", "order.created", json.RawMessage(`{`))
		require.ErrorIs(t, err, producer.ErrInvalidEvent)
		_, err = pub.Publish(ctx, "we_a", "order.created", make(chan int))
		require.ErrorIs(t, err, producer.ErrInvalidEvent)
		_, err = pub.Publish(ctx, "we_a", "", map[string]int{})
		require.ErrorIs(t, err, producer.ErrInvalidEvent)
	})
	t.Run("API version and another log", func(t *testing.T) {
		other := memstore.NewLog()
		p2 := mustPublisher(t, l, eps, &producer.PublisherOptions{APIVersion: "2026-01-01", Now: clk.Now}).WithLog(other)
		clk.Advance(time.Hour)
		ev, err := p2.Publish(ctx, "we_a", "order.filled", map[string]string{})
		require.NoError(t, err)
		require.Equal(t, uint64(1), ev.Sequence, "a separate log has its own streams")
		require.Equal(t, "2026-01-01", ev.APIVersion)
		require.Equal(t, t0.Add(time.Hour).Unix(), ev.Created)
		_, _, err = l.Range(ctx, "we_a", 1, 1, 1)
		require.NoError(t, err)
	})
	t.Run("defaults", func(t *testing.T) {
		ev, err := mustPublisher(t, memstore.NewLog(), eps, nil).Publish(ctx, "we_a", "order.created", 1)
		require.NoError(t, err)
		require.InDelta(t, time.Now().Unix(), ev.Created, 5)
	})
}

func TestPublishToSkipsTheLookup(t *testing.T) {
	l := memstore.NewLog()
	var lookups atomic.Int64
	eps := countingEndpoints{lookups: &lookups}
	pub := mustPublisher(t, l, eps, nil)
	ev, err := pub.PublishTo(context.Background(), producer.Endpoint{ID: "we_a"}, "order.created", map[string]int{"n": 1})
	require.NoError(t, err)
	require.Equal(t, uint64(1), ev.Sequence)
	require.JSONEq(t, `{"n":1}`, string(ev.Data))
	require.Zero(t, lookups.Load())
	_, err = pub.PublishTo(context.Background(), producer.Endpoint{}, "order.created", 1)
	require.ErrorIs(t, err, producer.ErrUnknownEndpoint)
	_, err = pub.Publish(context.Background(), "we_a", "order.created", 1)
	require.ErrorIs(t, err, producer.ErrUnknownEndpoint)
	require.Equal(t, int64(1), lookups.Load())
}

type countingEndpoints struct{ lookups *atomic.Int64 }

func (c countingEndpoints) Lookup(context.Context, string) (producer.Endpoint, error) {
	c.lookups.Add(1)
	return producer.Endpoint{}, producer.ErrUnknownEndpoint
}

// TestPublishToEach: one business event, an event of its own on each endpoint's stream, data
// marshalled once; in one AppendBatch on a BatchAppender log and one Append each on any other log.
func TestPublishToEach(t *testing.T) {
	ctx := context.Background()
	eps := []producer.Endpoint{{ID: "we_a"}, {ID: "we_b"}, {ID: "we_c"}}
	for name, l := range map[string]driver.Log{
		"batch":    memstore.NewLog(),
		"one each": appendOnly{memstore.NewLog()},
	} {
		t.Run(name, func(t *testing.T) {
			pub := mustPublisher(t, l, countingEndpoints{lookups: new(atomic.Int64)}, &producer.PublisherOptions{Now: newClock().Now})
			evs, err := pub.PublishToEach(ctx, eps, "order.created", map[string]string{"id": "ord_1"})
			require.NoError(t, err)
			require.Len(t, evs, 3)
			seen := map[string]bool{}
			for i, e := range evs {
				require.False(t, seen[e.ID], "each endpoint gets an event of its own")
				seen[e.ID] = true
				require.Equal(t, uint64(1), e.Sequence)
				require.JSONEq(t, `{"id":"ord_1"}`, string(e.Data))
				got, _, err := l.Range(ctx, eps[i].ID, 1, 1, 1)
				require.NoError(t, err)
				require.Equal(t, e.ID, got[0].ID, "in the order of the endpoints")
				require.Equal(t, t0.Unix(), got[0].Created)
			}

			none, err := pub.PublishToEach(ctx, nil, "order.created", 1)
			require.NoError(t, err)
			require.Empty(t, none)
			_, err = pub.PublishToEach(ctx, []producer.Endpoint{{ID: "we_a"}, {}}, "order.created", 1)
			require.ErrorIs(t, err, producer.ErrUnknownEndpoint)
			_, err = pub.PublishToEach(ctx, eps, "order.created", make(chan int))
			require.ErrorIs(t, err, producer.ErrInvalidEvent)
			_, err = pub.PublishToEach(ctx, eps, "", 1)
			require.ErrorIs(t, err, producer.ErrInvalidEvent)
			got, _, err := l.Range(ctx, "we_a", 1, 10, 10)
			require.NoError(t, err)
			require.Len(t, got, 1, "refused publications appended nothing")
		})
	}
}

// appendOnly hides a log's BatchAppender.
type appendOnly struct{ driver.Log }
