package producer_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// ownerEndpoints registers we_a1, we_a2, we_a3 for lic_a and we_b1 for lic_b.
func ownerEndpoints(t testing.TB) *memstore.Endpoints {
	ep := func(id, owner string) producer.Endpoint {
		return producer.Endpoint{ID: id, URL: "https://consumer.example/" + id, Owner: owner, Secrets: []string{webhook.NewSecret()}}
	}
	// Registered out of order: the listing, not the registration, orders them.
	return mustEndpoints(t, ep("we_a3", "lic_a"), ep("we_b1", "lic_b"), ep("we_a1", "lic_a"), ep("we_a2", "lic_a"))
}

func streamSeqs(t testing.TB, l driver.Log, stream string) []uint64 {
	t.Helper()
	evs, _, err := l.Range(context.Background(), stream, 1, math.MaxUint64, producer.MaxRangeLimit)
	require.NoError(t, err)
	out := []uint64{}
	for _, e := range evs {
		out = append(out, e.Sequence)
	}
	return out
}

// TestPublishToOwner: each of the owner's endpoints gets an event of its own, numbered in its own
// stream; other owners' streams are untouched.
func TestPublishToOwner(t *testing.T) {
	ctx := context.Background()
	l := memstore.NewLog()
	pub := mustPublisher(t, l, ownerEndpoints(t), &producer.PublisherOptions{Now: newClock().Now})

	for n := uint64(1); n <= 2; n++ {
		evs, err := pub.PublishToOwner(ctx, "lic_a", "order.created", map[string]uint64{"n": n})
		require.NoError(t, err)
		require.Len(t, evs, 3)
		ids := map[string]bool{}
		for i, e := range evs {
			require.Equal(t, fmt.Sprintf("we_a%d", i+1), e.Endpoint, "in order of endpoint ID, each naming its endpoint")
			require.Equal(t, n, e.Sequence, "each stream numbers on its own")
			require.Equal(t, "order.created", e.Type)
			require.Equal(t, t0.Unix(), e.Created)
			require.Equal(t, producer.DefaultAPIVersion, e.APIVersion)
			require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, n), string(e.Data))
			require.False(t, ids[e.ID], "an event ID of its own per endpoint")
			ids[e.ID] = true
			got, _, err := l.Range(ctx, e.Endpoint, n, n, 1)
			require.NoError(t, err)
			require.Equal(t, e.ID, got[0].ID)
		}
	}
	for _, s := range []string{"we_a1", "we_a2", "we_a3"} {
		require.Equal(t, []uint64{1, 2}, streamSeqs(t, l, s), s)
	}
	require.Empty(t, streamSeqs(t, l, "we_b1"), "another owner's stream is untouched")

	evs, err := pub.PublishToOwner(ctx, "lic_b", "order.created", 1)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, uint64(1), evs[0].Sequence)
	require.Equal(t, []uint64{1, 2}, streamSeqs(t, l, "we_a1"))
}

func TestPublishToOwnerEdges(t *testing.T) {
	ctx := context.Background()
	eps := ownerEndpoints(t)

	t.Run("an owner without endpoints publishes nothing, without error", func(t *testing.T) {
		l := memstore.NewLog()
		evs, err := mustPublisher(t, l, eps, nil).PublishToOwner(ctx, "lic_nobody", "order.created", 1)
		require.NoError(t, err)
		require.NotNil(t, evs)
		require.Empty(t, evs)
	})
	t.Run("refusals", func(t *testing.T) {
		l := memstore.NewLog()
		pub := mustPublisher(t, l, eps, nil)
		_, err := pub.PublishToOwner(ctx, "", "order.created", 1)
		require.ErrorIs(t, err, producer.ErrInvalidEvent)
		// The event is checked even when the owner has no endpoint to publish to.
		for _, owner := range []string{"lic_a", "lic_nobody"} {
			_, err = pub.PublishToOwner(ctx, owner, "", 1)
			require.ErrorIs(t, err, producer.ErrInvalidEvent)
			_, err = pub.PublishToOwner(ctx, owner, "order.created", []byte(`{`))
			require.ErrorIs(t, err, producer.ErrInvalidEvent)
			_, err = pub.PublishToOwner(ctx, owner, "order.created", make(chan int))
			require.ErrorIs(t, err, producer.ErrInvalidEvent)
		}
		require.Empty(t, streamSeqs(t, l, "we_a1"))
	})
	t.Run("an Endpoints that cannot list is an error", func(t *testing.T) {
		l := memstore.NewLog()
		pub := mustPublisher(t, l, countingEndpoints{lookups: new(atomic.Int64)}, nil)
		evs, err := pub.PublishToOwner(ctx, "lic_a", "order.created", 1)
		require.ErrorIs(t, err, producer.ErrNoListing)
		require.Nil(t, evs)
	})
	t.Run("a listing that fails publishes nothing", func(t *testing.T) {
		l := memstore.NewLog()
		boom := errors.New("registry down")
		pub := mustPublisher(t, l, failingLister{eps, boom}, nil)
		_, err := pub.PublishToOwner(ctx, "lic_a", "order.created", 1)
		require.ErrorIs(t, err, boom)
		require.Empty(t, streamSeqs(t, l, "we_a1"))
	})
	t.Run("more endpoints than MaxFanOut publishes nothing", func(t *testing.T) {
		l := memstore.NewLog()
		_, err := mustPublisher(t, l, eps, &producer.PublisherOptions{MaxFanOut: 2}).PublishToOwner(ctx, "lic_a", "order.created", 1)
		require.ErrorIs(t, err, producer.ErrFanOutLimit)
		for _, s := range []string{"we_a1", "we_a2", "we_a3"} {
			require.Empty(t, streamSeqs(t, l, s))
		}
		evs, err := mustPublisher(t, l, eps, &producer.PublisherOptions{MaxFanOut: 3}).PublishToOwner(ctx, "lic_a", "order.created", 1)
		require.NoError(t, err)
		require.Len(t, evs, 3, "exactly MaxFanOut is allowed")
	})
	t.Run("a failing AppendBatch publishes none, and is not retried one by one", func(t *testing.T) {
		inner := memstore.NewLog()
		l := &failingBatchLog{Log: inner, err: errors.New("disk full")}
		_, err := mustPublisher(t, l, eps, nil).PublishToOwner(ctx, "lic_a", "order.created", 1)
		require.ErrorIs(t, err, l.err)
		require.Equal(t, int64(1), l.batches.Load(), "one batch call")
		require.Zero(t, l.appends.Load(), "no fallback to one Append per endpoint")
		for _, s := range []string{"we_a1", "we_a2", "we_a3"} {
			require.Empty(t, streamSeqs(t, inner, s))
		}
	})
	t.Run("a log without AppendBatch gets one Append per endpoint", func(t *testing.T) {
		l := memstore.NewLog()
		evs, err := mustPublisher(t, appendOnly{l}, eps, nil).PublishToOwner(ctx, "lic_a", "order.created", 1)
		require.NoError(t, err)
		require.Len(t, evs, 3)
		for _, s := range []string{"we_a1", "we_a2", "we_a3"} {
			require.Equal(t, []uint64{1}, streamSeqs(t, l, s))
		}
	})
	t.Run("a log numbered after the commit", func(t *testing.T) {
		l := memstore.NewDeferredLog()
		pub := mustPublisher(t, l, eps, nil)
		for range 2 {
			evs, err := pub.PublishToOwner(ctx, "lic_a", "order.created", 1)
			require.NoError(t, err)
			for _, e := range evs {
				require.Zero(t, e.Sequence, "not numbered yet")
			}
		}
		_, err := l.Sequence(ctx, 100)
		require.NoError(t, err)
		for _, s := range []string{"we_a1", "we_a2", "we_a3"} {
			require.Equal(t, []uint64{1, 2}, streamSeqs(t, l, s))
		}
	})
	t.Run("the Publisher's registry can be swapped, as for a transaction", func(t *testing.T) {
		l := memstore.NewLog()
		pub := mustPublisher(t, l, countingEndpoints{lookups: new(atomic.Int64)}, nil)
		evs, err := pub.WithEndpoints(eps).PublishToOwner(ctx, "lic_b", "order.created", 1)
		require.NoError(t, err)
		require.Len(t, evs, 1)
	})
}

// TestPublishToOwnerConcurrent: racing publications to one owner leave each of its streams numbered
// 1..n, and on a memstore.Log (one lock per batch) in the same order on every stream.
func TestPublishToOwnerConcurrent(t *testing.T) {
	const racers, each = 8, 50
	ctx := context.Background()
	l := memstore.NewLog()
	pub := mustPublisher(t, l, ownerEndpoints(t), nil)
	var wg sync.WaitGroup
	for g := range racers {
		wg.Go(func() {
			for i := range each {
				if _, err := pub.PublishToOwner(ctx, "lic_a", "order.created", map[string]int{"g": g, "i": i}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var first []string
	for _, s := range []string{"we_a1", "we_a2", "we_a3"} {
		evs, _, err := l.Range(ctx, s, 1, math.MaxUint64, producer.MaxRangeLimit)
		require.NoError(t, err)
		require.Len(t, evs, racers*each)
		var datas []string
		for i, e := range evs {
			require.Equal(t, uint64(i+1), e.Sequence)
			datas = append(datas, string(e.Data))
		}
		if first == nil {
			first = datas
		}
		require.Equal(t, first, datas, "the same order on every stream of the owner")
	}
}

func TestNewPublisherRefusals(t *testing.T) {
	eps := ownerEndpoints(t)
	for name, tc := range map[string]struct {
		log  driver.Log
		eps  driver.Endpoints
		opts *producer.PublisherOptions
	}{
		"nil Log":            {nil, eps, nil},
		"nil Endpoints":      {memstore.NewLog(), nil, nil},
		"negative MaxFanOut": {memstore.NewLog(), eps, &producer.PublisherOptions{MaxFanOut: -1}},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := producer.NewPublisher(tc.log, tc.eps, tc.opts)
			require.Error(t, err)
			require.Regexp(t, `^producer: `, err.Error())
			require.Nil(t, p)
		})
	}

	// Misuse fails instead of panicking.
	ctx := context.Background()
	var zero producer.Publisher
	_, err := zero.Publish(ctx, "we_a1", "order.created", 1)
	require.Error(t, err)
	_, err = zero.PublishToOwner(ctx, "lic_a", "order.created", 1)
	require.Error(t, err)
	_, err = zero.PublishToEach(ctx, []producer.Endpoint{{ID: "we_a1"}}, "order.created", 1)
	require.Error(t, err)
	pub := mustPublisher(t, memstore.NewLog(), eps, nil)
	_, err = pub.WithLog(nil).PublishTo(ctx, producer.Endpoint{ID: "we_a1"}, "order.created", 1)
	require.Error(t, err)
	_, err = pub.WithEndpoints(nil).PublishToOwner(ctx, "lic_a", "order.created", 1)
	require.Error(t, err)
}

// failingLister is a registry whose listing fails.
type failingLister struct {
	driver.Endpoints
	err error
}

func (f failingLister) ListEndpoints(context.Context, driver.EndpointQuery) ([]producer.Endpoint, bool, error) {
	return nil, false, f.err
}

// failingBatchLog is a memstore.Log whose AppendBatch fails; it counts the appends it is asked for.
type failingBatchLog struct {
	*memstore.Log
	err              error
	batches, appends atomic.Int64
}

func (f *failingBatchLog) AppendBatch(context.Context, []driver.StreamEvent) ([]webhook.Event, error) {
	f.batches.Add(1)
	return nil, f.err
}

func (f *failingBatchLog) Append(ctx context.Context, e driver.StreamEvent) (webhook.Event, error) {
	f.appends.Add(1)
	return f.Log.Append(ctx, e)
}

// BenchmarkPublishToOwner publishes one business event to a licensee's 8 endpoints on a memstore.Log:
// the listing, one marshal and one batch of 8 appends.
func BenchmarkPublishToOwner(b *testing.B) {
	eps := make([]producer.Endpoint, 8)
	for i := range eps {
		eps[i] = producer.Endpoint{ID: fmt.Sprintf("we_%d", i), URL: "https://consumer.example/hooks", Owner: "lic_busy",
			Secrets: []string{webhook.NewSecret()}}
	}
	// Other licensees' endpoints beside: the listing reads the owner's only.
	for i := range 1000 {
		eps = append(eps, producer.Endpoint{ID: fmt.Sprintf("we_other_%d", i), URL: "https://consumer.example/hooks",
			Owner: fmt.Sprintf("lic_%d", i), Secrets: []string{webhook.NewSecret()}})
	}
	pub := mustPublisher(b, memstore.NewLog(), mustEndpoints(b, eps...), nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		evs, err := pub.PublishToOwner(ctx, "lic_busy", "order.created", benchData)
		if err != nil || len(evs) != 8 {
			b.Fatal(err, len(evs))
		}
	}
}
