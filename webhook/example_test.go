package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/webhooktest"
)

func ExampleSign() {
	body := []byte(`{"a":1}`)
	header, err := webhook.Sign(body, time.Unix(1767225600, 0), "whsec_test_secret")
	if err != nil {
		panic(err)
	}
	fmt.Println(header)
	// Output:
	// t=1767225600,v1=3cde36233d9b3d0004bf8381645daaee4139c891a3043a76b02f3ee8770ea82f
}

func ExampleVerifier_Verify() {
	secret := webhook.NewSecret()
	signedAt := time.Unix(1767225600, 0)
	body := []byte(`{"id":"evt_1","sequence":1,"type":"order.created"}`)
	header, _ := webhook.Sign(body, signedAt, secret)

	now := signedAt.Add(10 * time.Second)
	v, err := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	fmt.Println("genuine:", v.Verify(header, body))

	err = v.Verify(header, []byte(`{"id":"evt_1","sequence":1,"type":"order.refunded"}`))
	fmt.Println("altered body:", errors.Is(err, webhook.ErrSignatureMismatch))

	now = signedAt.Add(time.Hour) // a replay an hour later
	err = v.Verify(header, body)
	fmt.Println("replayed:", errors.Is(err, webhook.ErrTooOld))

	_, err = webhook.NewVerifier([]string{""}, nil)
	fmt.Println("empty secret:", errors.Is(err, webhook.ErrNoSecret))
	// Output:
	// genuine: <nil>
	// altered body: true
	// replayed: true
	// empty secret: true
}

// A consumer: deliveries go to a Receiver, which verifies them and hands them to a Tracker; the
// Tracker fetches what was missed and processes every event once, in order.
func ExampleNewReceiver() {
	secret := webhook.NewSecret()
	now := time.Unix(1767225600, 0)
	clock := func() time.Time { return now }

	// The producer side, faked in memory: three events on endpoint we_1, and its range endpoint.
	src := webhooktest.NewSource(secret, "sk_sandbox_example", &webhooktest.SourceOptions{Now: clock})
	for range 3 {
		src.Emit("we_1", "order.created", nil)
	}
	producer := httptest.NewServer(src)
	defer producer.Close()

	// The consumer.
	v, _ := webhook.NewVerifier([]string{secret}, &webhook.VerifierOptions{Now: clock})
	fetch, _ := webhook.NewRangeClient(producer.URL, "sk_sandbox_example", v, nil)
	process := func(ctx context.Context, s webhook.Step) error {
		fmt.Printf("  processing %d (fetched: %v)\n", s.Event.Sequence, s.Fetched)
		return nil
	}
	tracker, _ := webhook.NewTracker(&webhook.MemoryCursorStore{}, fetch, process, nil)
	rc, _ := webhook.NewReceiver("we_1", v, tracker, nil)

	for _, seq := range []uint64{1, 3, 2} { // 2 arrives late
		fmt.Printf("deliver %d:\n", seq)
		rec := src.Deliver(rc, "we_1", seq)
		fmt.Printf("  %d %s", rec.Code, rec.Body)
	}
	// Output:
	// deliver 1:
	//   processing 1 (fetched: false)
	//   200 {"sequence":1,"outcome":"processed","recovered":0}
	// deliver 3:
	//   processing 2 (fetched: true)
	//   processing 3 (fetched: false)
	//   200 {"sequence":3,"outcome":"processed","recovered":1}
	// deliver 2:
	//   200 {"sequence":2,"outcome":"duplicate","recovered":0}
}

func ExampleTracker_Receive() {
	src := webhooktest.NewSource(webhook.NewSecret(), "sk_sandbox_example", nil)
	for range 5 {
		src.Emit("we_1", "order.created", nil)
	}
	var processed []uint64
	tracker, _ := webhook.NewTracker(&webhook.MemoryCursorStore{}, src, func(ctx context.Context, s webhook.Step) error {
		processed = append(processed, s.Event.Sequence)
		return nil
	}, nil)

	for _, seq := range []uint64{2, 2, 5, 4} {
		ev := src.Event("we_1", seq)
		res, err := tracker.Receive(context.Background(), "we_1", &ev)
		fmt.Println(seq, res.Outcome, res.Recovered, err)
	}
	fmt.Println("processed:", processed)
	// Output:
	// 2 processed 1 <nil>
	// 2 duplicate 0 <nil>
	// 5 processed 2 <nil>
	// 4 duplicate 0 <nil>
	// processed: [1 2 3 4 5]
}

func ExampleRangeClient_FetchRange() {
	secret := webhook.NewSecret()
	src := webhooktest.NewSource(secret, "sk_sandbox_example", nil)
	for range 10 {
		src.Emit("we_1", "order.created", nil)
	}
	producer := httptest.NewServer(src)
	defer producer.Close()

	v, _ := webhook.NewVerifier([]string{secret}, nil)
	c, _ := webhook.NewRangeClient(producer.URL, "sk_sandbox_example", v, &webhook.RangeClientOptions{PageSize: 3})
	evs, err := c.FetchRange(context.Background(), "we_1", 4, 8) // two pages, both signature-checked
	if err != nil {
		panic(err)
	}
	for _, ev := range evs {
		fmt.Print(ev.Sequence, " ")
	}
	fmt.Println()
	// Output:
	// 4 5 6 7 8
}
