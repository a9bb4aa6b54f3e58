package producer

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svcplatform/conventions/internal/randid"
	"github.com/svcplatform/conventions/webhook"
	"github.com/svcplatform/conventions/webhook/producer/driver"
	"github.com/svcplatform/conventions/webhook/producer/memstore"
)

// appendOnlyLog keeps nothing: Append returns the event, so that what is measured is the caller's.
type appendOnlyLog struct{ driver.Log }

func (appendOnlyLog) Append(_ context.Context, e driver.StreamEvent) (webhook.Event, error) {
	return e.Event, nil
}

type answerAt200 struct{ resp *http.Response }

func (a answerAt200) RoundTrip(r *http.Request) (*http.Response, error) { return a.resp, nil }

// TestNilObserverAddsNoAllocations: without an Observer, publishing allocates what the event's ID
// and the Log's Append do, and a delivery attempt what its request does: the observer's hooks cost
// nothing.
func TestNilObserverAddsNoAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts vary under the race detector")
	}
	ctx := context.Background()
	data := json.RawMessage(`{"id":"ord_1"}`)
	eps, err := memstore.NewEndpoints(Endpoint{ID: "we_a", URL: "https://a.example/", Owner: "lic_1", Secrets: []string{webhook.NewSecret()}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPublisher(appendOnlyLog{}, eps, nil)
	if err != nil {
		t.Fatal(err)
	}
	var boxed any = data // as callers pass it
	publish := testing.AllocsPerRun(200, func() { _, _ = p.publish(ctx, "we_a", "order.created", boxed) })
	bare := testing.AllocsPerRun(200, func() {
		_, _ = p.log.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: webhook.Event{ID: randid.New("evt_"), Type: "order.created", Created: time.Now().Unix(), Data: data}})
	})
	if publish != bare {
		t.Errorf("publish allocates %v, its ID and Append %v", publish, bare)
	}

	resp := &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}
	d, err := NewDispatcher(memstore.NewLog(), eps, &DispatcherOptions{Client: &http.Client{Transport: answerAt200{resp}}})
	if err != nil {
		t.Fatal(err)
	}
	ep, _ := eps.Lookup(ctx, "we_a")
	dl := driver.Delivery{Lease: driver.Lease{Stream: "we_a", Sequence: 1, Token: 1}, Event: webhook.Event{ID: "evt_1", Type: "order.created"}}
	body, sig := []byte(`{}`), "t=1,v1=00"
	attempt := testing.AllocsPerRun(200, func() {
		r := result{body: body, sig: sig}
		d.attempt(ctx, ep, dl, &r)
	})
	send := testing.AllocsPerRun(200, func() { _, _, _ = d.send(ctx, ep, dl, body, sig) })
	if attempt != send {
		t.Errorf("an attempt allocates %v, its request %v", attempt, send)
	}

	l := memstore.NewLog()
	if _, err := l.Append(ctx, driver.StreamEvent{Stream: "we_a", Event: webhook.Event{Type: "order.created", Data: data}}); err != nil {
		t.Fatal(err)
	}
	rh, err := NewRangeHandler(l, eps, func(*http.Request) (string, error) { return "lic_1", nil },
		&RangeHandlerOptions{EndpointID: func(*http.Request) string { return "we_a" }})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/v1/webhook_endpoints/we_a/events?from=1", nil)
	w := httptest.NewRecorder()
	served := testing.AllocsPerRun(200, func() { w.Body.Reset(); rh.ServeHTTP(w, req) })
	bareServe := testing.AllocsPerRun(200, func() { w.Body.Reset(); rh.serve(w, req) })
	if served != bareServe {
		t.Errorf("a range request allocates %v, serving it %v", served, bareServe)
	}
}
