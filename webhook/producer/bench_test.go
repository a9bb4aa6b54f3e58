package producer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

var benchData = json.RawMessage(`{"id":"ord_2x7kq","account":"acc_91","side":"buy","qty":"12.5000","price":"101.25","currency":"EUR"}`)

func benchEvent() webhook.Event {
	return webhook.Event{Type: "order.created", Created: t0.Unix(), APIVersion: "v1", Data: benchData}
}

func BenchmarkMemoryLogAppend(b *testing.B) {
	for _, streams := range []int{1, 8} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			l := memstore.NewLog()
			var next atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				stream := fmt.Sprintf("we_%d", next.Add(1)%int64(streams))
				ctx := context.Background()
				for pb.Next() {
					if _, err := l.Append(ctx, driver.StreamEvent{Stream: stream, Event: benchEvent()}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func BenchmarkMemoryLogRange1000(b *testing.B) {
	l := memstore.NewLog()
	publishN(b, l, "we_a", 5000, t0)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		evs, _, err := l.Range(ctx, "we_a", 2001, 3000, 1000)
		if err != nil || len(evs) != 1000 {
			b.Fatal(err, len(evs))
		}
	}
}

// BenchmarkRangeHandler1000 is a whole range request: parameters, ownership, read, JSON and signature.
func BenchmarkRangeHandler1000(b *testing.B) {
	l := memstore.NewLog()
	for range 1000 {
		if _, err := l.Append(context.Background(), driver.StreamEvent{Stream: "we_a", Event: benchEvent()}); err != nil {
			b.Fatal(err)
		}
	}
	eps := mustEndpoints(b, producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	mux := http.NewServeMux()
	mux.Handle(producer.RangePattern("v1"), must(producer.NewRangeHandler(l, eps, func(*http.Request) (string, error) { return "lic_1", nil }, nil)))
	r := httptest.NewRequest(http.MethodGet, "/v1/webhook_endpoints/we_a/events?from=1&to=1000&limit=1000", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
		b.SetBytes(int64(w.Body.Len()))
	}
}

// BenchmarkDispatcherDeliver measures the dispatcher's own work per delivery — claim, render,
// marshal, sign, settle — with a transport that answers at once.
func BenchmarkDispatcherDeliver(b *testing.B) {
	eps := mustEndpoints(b, producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) { return respond(r, http.StatusOK), nil })}
	l := memstore.NewLog()
	d := mustDispatcher(b, l, eps, &producer.DispatcherOptions{Client: client, Now: newClock().Now, BatchSize: 100})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: benchEvent()}); err != nil {
			b.Fatal(err)
		}
		if st, err := d.DeliverDue(ctx); err != nil || st.Delivered != 1 {
			b.Fatal(err, st)
		}
	}
}

// BenchmarkDispatcherDeliverHTTP is the same over a loopback HTTP server.
func BenchmarkDispatcherDeliverHTTP(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	eps := mustEndpoints(b, producer.Endpoint{ID: "we_a", URL: srv.URL, Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	l := memstore.NewLog()
	d := mustDispatcher(b, l, eps, &producer.DispatcherOptions{Now: newClock().Now})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: benchEvent()}); err != nil {
			b.Fatal(err)
		}
		if st, err := d.DeliverDue(ctx); err != nil || st.Delivered != 1 {
			b.Fatal(err, st)
		}
	}
}

// BenchmarkPublish is one Publish to the in-memory log: lookup, marshal, stamp, append.
func BenchmarkPublish(b *testing.B) {
	eps := mustEndpoints(b, producer.Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	pub := mustPublisher(b, memstore.NewLog(), eps, &producer.PublisherOptions{Now: newClock().Now})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pub.Publish(ctx, "we_a", "order.created", benchData); err != nil {
			b.Fatal(err)
		}
	}
}
