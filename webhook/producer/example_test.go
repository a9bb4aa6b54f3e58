package producer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/svcplatform/conventions/ssrf"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// A producer with the in-memory log delivers three events to a consumer that verifies each signature.
func Example() {
	ctx := context.Background()
	secret := webhook.NewSecret()

	// The consumer: verify the signature over the raw body, then read the event.
	verifier, err := webhook.NewVerifier([]string{secret}, nil)
	if err != nil {
		panic(err)
	}
	got := make(chan string, 3)
	consumer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := verifier.Verify(r.Header.Get(webhook.HeaderSignature), body); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var ev webhook.Event
		_ = json.Unmarshal(body, &ev)
		got <- fmt.Sprintf("#%s %s %s", r.Header.Get(webhook.HeaderSequence), ev.Type, ev.Data)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer consumer.Close()

	// The producer.
	eps, err := memstore.NewEndpoints(producer.Endpoint{
		ID: "we_123", URL: consumer.URL, Owner: "lic_1", Secrets: []string{secret},
	})
	if err != nil {
		panic(err)
	}
	log := memstore.NewLog()
	pub, err := producer.NewPublisher(log, eps, nil)
	if err != nil {
		panic(err)
	}
	for _, id := range []string{"ord_1", "ord_2", "ord_3"} {
		if _, err := pub.Publish(ctx, "we_123", "order.created", map[string]string{"id": id}); err != nil {
			panic(err)
		}
	}
	// The default client dials public addresses only; this consumer is on loopback, so allow it.
	d, err := producer.NewDispatcher(log, eps, &producer.DispatcherOptions{
		Guard: &ssrf.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
	})
	if err != nil {
		panic(err)
	}
	st, err := d.DeliverDue(ctx) // Run(ctx) does this in a loop
	if err != nil {
		panic(err)
	}
	for range 3 {
		fmt.Println(<-got)
	}
	fmt.Printf("delivered %d of %d\n", st.Delivered, st.Claimed)
	// Output:
	// #1 order.created {"id":"ord_1"}
	// #2 order.created {"id":"ord_2"}
	// #3 order.created {"id":"ord_3"}
	// delivered 3 of 3
}

// The range endpoint serves a consumer the events it missed, signed; below the retained window it
// answers 410 and says which events are gone.
func ExampleRangeHandler() {
	ctx := context.Background()
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	eps, _ := memstore.NewEndpoints(producer.Endpoint{
		ID: "we_123", URL: "https://consumer.example/hooks", Owner: "lic_1", Secrets: []string{webhook.NewSecret()},
	})
	log := memstore.NewLog()
	for i := 1; i <= 5; i++ {
		_, _ = log.Append(ctx, driver.StreamEvent{Stream: "we_123", Event: webhook.Event{ID: fmt.Sprintf("evt_%d", i), Type: "order.created",
			Created: created.Add(time.Duration(i) * time.Hour).Unix(), APIVersion: "v1", Data: json.RawMessage(`{}`)}})
	}
	// Retention removes the events created before 02:30: sequences 1 and 2.
	_, _ = log.Cleanup(ctx, created.Add(150*time.Minute), 100)

	licensee := func(r *http.Request) (string, error) { return "lic_1", nil } // your authentication
	ranges, err := producer.NewRangeHandler(log, eps, licensee, nil)
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle(producer.RangePattern("v1"), ranges)

	for _, target := range []string{
		"/v1/webhook_endpoints/we_123/events?from=3&to=4",
		"/v1/webhook_endpoints/we_123/events?from=1",
	} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
		fmt.Println(w.Code, w.Header().Get(webhook.HeaderSignature) != "")
		var body struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
			HasMore bool   `json:"has_more"`
			Detail  string `json:"detail"`
		}
		_ = json.Unmarshal(w.Body.Bytes(), &body)
		if w.Code == http.StatusOK {
			fmt.Println(body.Data, "has_more:", body.HasMore)
		} else {
			fmt.Println(body.Detail)
		}
	}
	// Output:
	// 200 true
	// [{evt_3} {evt_4}] has_more: false
	// 410 false
	// events 1–2 of webhook endpoint "we_123" are past the retention window and gone; the first retained sequence is 3
}

func ExampleExponentialSchedule() {
	fmt.Println(producer.ExponentialSchedule(time.Second, 10*time.Second, time.Minute))
	var total time.Duration
	for _, d := range producer.DefaultSchedule() {
		total += d
	}
	fmt.Println(len(producer.DefaultSchedule()), "retries over", total)
	// Output:
	// [1s 2s 4s 8s 10s 10s 10s 10s 5s]
	// 15 retries over 72h0m0s
}

// PublishToOwner sends one business event to every endpoint of a licensee; each endpoint's stream
// numbers its copy on its own.
func ExamplePublisher_PublishToOwner() {
	ctx := context.Background()
	eps, err := memstore.NewEndpoints(
		producer.Endpoint{ID: "we_erp", URL: "https://erp.example/hooks", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}},
		producer.Endpoint{ID: "we_crm", URL: "https://crm.example/hooks", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}},
		producer.Endpoint{ID: "we_other", URL: "https://other.example/hooks", Owner: "lic_2", Secrets: []string{webhook.NewSecret()}},
	)
	if err != nil {
		panic(err)
	}
	log := memstore.NewLog()
	pub, err := producer.NewPublisher(log, eps, nil)
	if err != nil {
		panic(err)
	}
	if _, err := pub.PublishToOwner(ctx, "lic_1", "order.created", map[string]string{"id": "ord_1"}); err != nil {
		panic(err)
	}
	evs, err := pub.PublishToOwner(ctx, "lic_1", "order.filled", map[string]string{"id": "ord_1"})
	if err != nil {
		panic(err)
	}
	for _, ev := range evs {
		fmt.Println(ev.Endpoint, ev.Sequence, ev.Type)
	}
	none, err := pub.PublishToOwner(ctx, "lic_3", "order.created", map[string]string{"id": "ord_2"})
	fmt.Println(len(none), err)
	// Output:
	// we_crm 2 order.filled
	// we_erp 2 order.filled
	// 0 <nil>
}
