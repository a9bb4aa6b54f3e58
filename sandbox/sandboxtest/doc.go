// Package sandboxtest is an in-process webhook producer for consumers' own Go tests, in the spirit of
// net/http/httptest: a consumer developer proves that their receiver loses nothing — under dropped,
// duplicated, reordered, delayed and badly signed deliveries — without any server of ours running.
//
// NewProducer registers one webhook endpoint that points at the consumer's URL and starts an
// httptest server for the platform's API. The Producer hands the test what the real sandbox hands an
// evaluator:
//
//	p.URL         base URL: range retrieval GET /v1/webhook_endpoints/{id}/events?from=&to=&limit=
//	              (signed {"object":"list","data":[…],"has_more":…}) and the sandbox controls
//	              under /v1/sandbox/ (faults, trigger, reset)
//	p.APIKey      a sandbox key ("sk_sandbox_…") for p.URL
//	p.Secret      the endpoint's signing secret ("whsec_…")
//	p.EndpointID  the endpoint, which is also the event stream
//
// Emit appends an event of the test's choosing to the endpoint's stream (envelope webhook.Event with
// the next sequence) and delivers it: POST, signed with X-SVC-Signature (webhook.Sign) and
// X-SVC-Sequence, through the endpoint's faults (sandbox.FaultTransport). A delivery the consumer
// does not answer with a 2xx is retried at once (whatever its Retry-After asks), up to
// Options.Retries times; then it is abandoned and stays retrievable by range. Reordered deliveries are sent before Emit returns, after the next
// delivery. Faults come from Options.Faults, SetFaults or the HTTP control, drawn from Options.Rand,
// so a seeded run replays exactly.
//
// A dropped event is noticed only when a later one arrives (or the consumer polls), so a test that
// injects drops ends with one clean event:
//
//	func TestReceiverLosesNothing(t *testing.T) {
//		rcv := myapp.NewReceiver(…)          // the consumer under test
//		srv := httptest.NewServer(rcv)
//		defer srv.Close()
//		p := sandboxtest.NewProducer(t, srv.URL+"/webhooks", &sandboxtest.Options{
//			Faults: sandbox.Faults{Drop: 0.2, Duplicate: 0.1, Reorder: 0.1, BadSignature: 0.05},
//			Rand:   rand.New(rand.NewPCG(1, 1)),
//		})
//		rcv.Configure(p.URL, p.APIKey, p.Secret) // range client and verifier
//		for i := range 100 {
//			if _, err := p.Emit(ctx, "order.created", map[string]int{"n": i}); err != nil {
//				t.Fatal(err)
//			}
//		}
//		p.SetFaults(sandbox.Faults{})
//		p.Emit(ctx, "test.end", nil)
//		// assert: the receiver processed sequences 1..101 exactly once, in order
//	}
package sandboxtest
