package versioning_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/svcplatform/conventions/apierror"
	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/versioning"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// twoVersions is a registry whose v2 renames an order's side to direction: a breaking change for
// requests, responses and webhook events alike. Handlers and stored events are v2's.
func twoVersions(t *testing.T) *versioning.Registry {
	t.Helper()
	reg, err := versioning.NewRegistry(
		[]versioning.Version{{Name: "v1", Released: v1Released}, {Name: "v2", Released: v2Released}},
		[]versioning.Change{{
			Name: "order_side_renamed_direction", Version: "v2", Object: "order",
			Description: "An order's side is called direction.",
			Response:    func(o map[string]any) error { rename(o, "direction", "side"); return nil },
			Request:     func(b map[string]any) error { rename(b, "side", "direction"); return nil },
		}})
	require.NoError(t, err)
	return reg
}

// consumed records what one consumer processed, in order, and signals each event.
type consumed struct {
	mu     sync.Mutex
	steps  []webhook.Step
	events chan uint64
}

func (c *consumed) process(_ context.Context, s webhook.Step) error {
	c.mu.Lock()
	c.steps = append(c.steps, s)
	c.mu.Unlock()
	c.events <- s.Event.Sequence
	return nil
}

// A v2-pinned consumer that misses a delivery recovers it through range retrieval under /v2/, in
// v2's shape, while a v1-pinned consumer gets v1's shape in its deliveries and in its ranges. Before,
// the RangeClient asked under /v1/, the router refused the v2 licensee (403 version_not_enabled) and
// the dropped event was never recovered.
func TestPinnedVersionsDeliverAndRecoverInTheirOwnShape(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pins := versioning.NewMemoryPinStore()
	keys := map[string]string{"Bearer sk_v1": "lic_v1", "Bearer sk_v2": "lic_v2"}
	licensee := func(r *http.Request) (string, error) { return keys[r.Header.Get("Authorization")], nil }
	router := must(versioning.New(twoVersions(t), &versioning.Options{Pins: pins, Licensee: licensee, StripVersion: true,
		Now: func() time.Time { return testNow }}))
	for lic, v := range map[string]string{"lic_v1": "v1", "lic_v2": "v2"} {
		_, err := router.Repin(ctx, lic, v)
		require.NoError(t, err)
	}

	secrets := map[string]string{"we_v1": webhook.NewSecret(), "we_v2": webhook.NewSecret()}
	log := memstore.NewLog()
	// The producer's API: range retrieval behind the versioning router, rendered at the pin.
	var eps *memstore.Endpoints
	mux := http.NewServeMux()
	api := httptest.NewServer(apierror.WithRequestID(router.Handler(mux)))
	defer api.Close()

	consumers := map[string]*consumed{}
	var dropped sync.Map // sequence numbers the v2 consumer's network lost
	dropped.Store(uint64(2), true)
	newConsumer := func(stream, key, version string, drop bool) string {
		c := &consumed{events: make(chan uint64, 16)}
		consumers[stream] = c
		v, err := webhook.NewVerifier([]string{secrets[stream]}, nil)
		require.NoError(t, err)
		rc, err := webhook.NewRangeClient(api.URL, key, v, &webhook.RangeClientOptions{APIVersion: version})
		require.NoError(t, err)
		tr, err := webhook.NewTracker(&webhook.MemoryCursorStore{}, rc, c.process, nil)
		require.NoError(t, err)
		rcv, err := webhook.NewReceiver(stream, v, tr, nil)
		require.NoError(t, err)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if seq, _ := webhook.ParseSequence(r.Header.Get(webhook.HeaderSequence)); drop {
				if _, lost := dropped.LoadAndDelete(seq); lost {
					w.WriteHeader(http.StatusOK) // acknowledged, then lost before processing
					return
				}
			}
			rcv.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	var err error
	eps, err = memstore.NewEndpoints(
		producer.Endpoint{ID: "we_v1", Owner: "lic_v1", Secrets: []string{secrets["we_v1"]},
			URL: newConsumer("we_v1", "sk_v1", "", false)},
		producer.Endpoint{ID: "we_v2", Owner: "lic_v2", Secrets: []string{secrets["we_v2"]},
			URL: newConsumer("we_v2", "sk_v2", "v2", true)},
	)
	require.NoError(t, err)
	mux.Handle(producer.RangePattern(""), must(producer.NewRangeHandler(log, eps, licensee,
		&producer.RangeHandlerOptions{Render: router.EventRenderer(nil)})))

	pub, err := producer.NewPublisher(log, eps, &producer.PublisherOptions{APIVersion: "v2"})
	require.NoError(t, err)
	for i, dir := range []string{"buy", "sell", "buy"} {
		for _, ep := range []string{"we_v1", "we_v2"} {
			_, err := pub.Publish(ctx, ep, "order.created", map[string]any{
				"object": "order", "id": "ord_" + string(rune('a'+i)), "direction": dir})
			require.NoError(t, err)
		}
	}
	d, err := producer.NewDispatcher(log, eps, &producer.DispatcherOptions{
		Render:       router.EventRenderer(nil),
		Guard:        &ssrf.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		PollInterval: 5 * time.Millisecond,
	})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	defer func() { cancel(); <-done }()

	for stream, c := range consumers {
		for want := uint64(1); want <= 3; want++ {
			select {
			case got := <-c.events:
				require.Equal(t, want, got, stream)
			case <-time.After(30 * time.Second):
				t.Fatalf("%s: event %d was not processed", stream, want)
			}
		}
	}
	_, stillDropped := dropped.Load(uint64(2))
	require.False(t, stillDropped, "the fault was injected")

	for stream, want := range map[string]struct{ version, member, absent string }{
		"we_v1": {"v1", "side", "direction"},
		"we_v2": {"v2", "direction", "side"},
	} {
		c := consumers[stream]
		c.mu.Lock()
		for _, s := range c.steps {
			require.Equal(t, s.Event.Sequence == 2 && stream == "we_v2", s.Fetched,
				"%s: only the dropped event is fetched", stream)
			require.Equal(t, want.version, s.Event.APIVersion, stream)
			var data map[string]any
			require.NoError(t, json.Unmarshal(s.Event.Data, &data))
			require.Contains(t, data, want.member, "%s event %d: %s", stream, s.Event.Sequence, s.Event.Data)
			require.NotContains(t, data, want.absent, stream)
		}
		c.mu.Unlock()
	}

	// The v1 licensee's ranges are v1's shape too, under /v1/; under /v2/ the router refuses it.
	v, err := webhook.NewVerifier([]string{secrets["we_v1"]}, nil)
	require.NoError(t, err)
	rc, err := webhook.NewRangeClient(api.URL, "sk_v1", v, nil)
	require.NoError(t, err)
	evs, err := rc.FetchRange(ctx, "we_v1", 1, 3)
	require.NoError(t, err)
	require.Len(t, evs, 3)
	for _, ev := range evs {
		require.True(t, strings.Contains(string(ev.Data), `"side"`), "%s", ev.Data)
	}
	rc2, err := webhook.NewRangeClient(api.URL, "sk_v1", v, &webhook.RangeClientOptions{APIVersion: "v2"})
	require.NoError(t, err)
	_, err = rc2.FetchRange(ctx, "we_v1", 1, 3)
	var p *apierror.Error
	require.ErrorAs(t, err, &p)
	require.Equal(t, versioning.CodeVersionNotEnabled, p.Code)
}

// EventRenderer renders at the pin of the licensee an endpoint maps to, and keeps what identifies
// the event.
func ExampleRouter_EventRenderer() {
	reg, _ := versioning.NewRegistry(
		[]versioning.Version{{Name: "v1", Released: v1Released}, {Name: "v2", Released: v2Released}},
		[]versioning.Change{{
			Name: "order_side_renamed_direction", Version: "v2", Object: "order",
			Description: "An order's side is called direction.",
			Response:    func(o map[string]any) error { o["side"] = o["direction"]; delete(o, "direction"); return nil },
		}})
	router, err := versioning.New(reg, nil)
	if err != nil {
		panic(err)
	}
	_, _ = router.Repin(context.Background(), "lic_1", "v1")
	render := router.EventRenderer(nil) // the endpoint's Owner is the licensee

	ep := producer.Endpoint{ID: "we_1", Owner: "lic_1"}
	ev := webhook.Event{ID: "evt_1", Sequence: 7, Type: "order.created", APIVersion: "v2",
		Data: json.RawMessage(`{"object":"order","id":"ord_1","direction":"buy"}`)}
	out, _ := render(context.Background(), ep, ev)
	fmt.Println(out.ID, out.Sequence, out.APIVersion, string(out.Data))
	// Output: evt_1 7 v1 {"id":"ord_1","object":"order","side":"buy"}
}

// An endpoint with a version of its own renders at it, whatever its licensee's pin; one without, or
// naming a version the registry does not know, renders at the pin.
func TestEventRendererPrefersTheEndpointsVersion(t *testing.T) {
	ctx := context.Background()
	router := must(versioning.New(twoVersions(t), &versioning.Options{Pins: versioning.NewMemoryPinStore(),
		Licensee: func(*http.Request) (string, error) { return "", nil }, Now: func() time.Time { return testNow }}))
	_, err := router.Repin(ctx, "lic_1", "v2")
	require.NoError(t, err)
	render := router.EventRenderer(nil)
	stored := webhook.Event{ID: "evt_1", Type: "order.created", APIVersion: "v2", Data: json.RawMessage(`{"object":"order","direction":"buy"}`)}
	for _, tc := range []struct{ endpointVersion, want, wantData string }{
		{"v1", "v1", `"side":"buy"`},
		{"", "v2", `"direction":"buy"`},
		{"v9", "v2", `"direction":"buy"`},
	} {
		ev, err := render(ctx, producer.Endpoint{ID: "we_1", Owner: "lic_1", APIVersion: tc.endpointVersion}, stored)
		require.NoError(t, err)
		require.Equal(t, tc.want, ev.APIVersion, tc.endpointVersion)
		require.Contains(t, string(ev.Data), tc.wantData, tc.endpointVersion)
	}
}
