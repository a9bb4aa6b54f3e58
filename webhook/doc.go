// Package webhook signs and verifies the platform's webhook deliveries and gives consumers a receiver
// that never loses an event: it tracks each endpoint's sequence and fetches any gap from the
// producer before going on. A complete consumer:
//
//	v, err := webhook.NewVerifier([]string{os.Getenv("WEBHOOK_SECRET")}, nil) // (each err checked: none panics)
//	fetch, err := webhook.NewRangeClient("https://api.svcplatform.dev", os.Getenv("API_KEY"), v, nil)
//	cursors := &webhook.MemoryCursorStore{} // pgstore.CursorStore to commit the cursor with your writes
//	tracker, err := webhook.NewTracker(cursors, fetch, func(ctx context.Context, s webhook.Step) error {
//		return apply(ctx, s.Event) // in sequence order, once per event, gaps fetched first
//	}, nil)
//	rc, err := webhook.NewReceiver("we_123", v, tracker, nil)
//	http.Handle("POST /webhooks/svc", rc)
//
// # Wire format
//
// A delivery is a POST whose body is one event envelope:
//
//	POST /your/webhook/url
//	Content-Type: application/json
//	X-SVC-Signature: t=1767225600,v1=5257a869e7ec…8bd[,v1=…]
//	X-SVC-Sequence: 42
//
//	{"object":"event","id":"evt_…","endpoint":"we_123","sequence":42,"type":"order.created","created":1767225600,"api_version":"v1","data":{…}}
//
// endpoint names the webhook endpoint the delivery was signed for (see Consuming), and object is
// always "event", as on every resource of the API (docs/decisions.md, D3 and D12). Consumers ignore
// members they do not know.
//
// v1 is the lowercase hex HMAC-SHA256 of "<t>.<raw body>", keyed with the signing secret's bytes exactly
// as issued ("whsec_…", prefix included); t is the signing time in Unix seconds. While a secret
// rotates, the producer sends one v1 per secret. This is Stripe's Stripe-Signature scheme byte for byte,
// so any Stripe-compatible verifier accepts it. X-SVC-Sequence repeats the body's sequence: one gap-free
// counter per webhook endpoint, starting at 1. The range endpoint
//
//	GET /{version}/webhook_endpoints/{id}/events?from=<n>&to=<n>&limit=<n>
//
// returns {"object":"list","data":[events],"has_more":bool}, signed the same way, each event rendered
// at the API version the consumer's licensee is pinned to. A consumer asks under that version:
// RangeClientOptions.APIVersion ("v2"), v1 by default; under another one the producer refuses it.
//
// # Verifying
//
// A Verifier holds the endpoint's secrets (several during rotation), a tolerance (300 s by default,
// checked in both directions) and a clock. It compares with hmac.Equal, streams "<t>", "." and the body
// into a pooled HMAC instead of building the signed string, and allocates nothing:
//
//	v, err := webhook.NewVerifier([]string{secret}, nil) // an empty secret is an error, never "off"
//	…
//	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20)) // the raw bytes, before any JSON parsing
//	if err := v.Verify(r.Header.Get(webhook.HeaderSignature), body); err != nil {
//		// errors.Is: ErrMissingHeader, ErrMalformedHeader (ErrDuplicateTimestamp, ErrInvalidTimestamp,
//		// ErrNoSignature), ErrSignatureMismatch, ErrTooOld, ErrTooNew. No message contains a
//		// signature or a secret.
//	}
//	ev, err := webhook.DecodeEvent(body)
//	err = webhook.CheckSequence(r.Header.Get(webhook.HeaderSequence), &ev) // header and body must agree
//
// # Consuming: Receiver, Tracker, CursorStore, RangeClient
//
// Most consumers mount a Receiver, which does all of the above and then applies the sequence rule
// through a Tracker, keyed by stream (the endpoint ID) and backed by a CursorStore that remembers the
// last sequence processed:
//
//   - sequence ≤ cursor: a duplicate — answered 200, not processed again;
//   - sequence = cursor+1: processed, then the cursor advances;
//   - sequence > cursor+1: the missing events are fetched with the RangeClient (signature checked),
//     checked to cover the whole gap, processed in order, and then the delivered one. If the fetch
//     fails, the delivery is answered 503 with Retry-After and the producer retries: nothing is
//     skipped.
//
// The envelope names the endpoint it was signed for ("endpoint":"we_…"); a Receiver refuses (401
// endpoint_mismatch) a delivery signed for another endpoint, one captured on its way there and
// replayed to an endpoint that shares its secret, and the RangeClient refuses such events in a page.
//
// A gap of any length is fetched and processed a page at a time (DefaultPageSize, 100 events), so a
// consumer never holds the gap: a 10,000-event gap of 1 KiB events peaks at a few MiB. The RangeClient
// reads no response past MaxResponseBytes (4 MiB) and no fetch past MaxFetchBytes (8 MiB) together
// (ErrRangeTooLarge); the Tracker then asks for fewer events at a time, so a producer with big events
// is still followed and a hostile one cannot balloon the consumer.
//
// Deliveries on one stream are processed one at a time, so out-of-order arrivals are never processed
// twice. A failing ProcessFunc leaves the cursor where it was (503). Store choices: MemoryCursorStore
// here; pgstore.CursorStore, which can advance the cursor in the same transaction as the consumer's own
// writes (so processing and cursor commit together, exactly once even across replicas); and
// redisstore.CursorStore. webhook/cursortest is their conformance suite. The consumer at the top of
// this page is all of it.
//
// Problems are RFC 9457 bodies (package apierror): 400 for a malformed X-SVC-Signature or
// X-SVC-Sequence, a body that is not an event, or a sequence mismatch — located at the header or body
// member; 401 when no signature matches or the timestamp is outside the tolerance (never saying which
// secret); 413 over the body cap; 503 with Retry-After when recovery or processing failed.
//
// A consumer that was down, or whose last deliveries were lost for good, calls Tracker.CatchUp to
// process everything the producer holds after its cursor.
//
// # Observing
//
// Hooks (package otelconv fills them with OpenTelemetry) are told what the consumer side decides:
// every verification and its result (VerifierOptions.Hooks), each delivery from arrival to answer,
// with the trace context the producer sent (ReceiverOptions.Hooks), each verdict of the sequence rule
// with the size of a gap (TrackerOptions.Hooks), and each range fetch with its result and duration,
// the fetch's trace context written into its requests (RangeClientOptions.Hooks). Pass the same ones
// to all four. They are never shown a secret, a signature or an API key: trace headers reach them
// through a TraceCarrier that hides them. Nil hooks cost nothing.
//
//	obs := tel.Webhook() // tel from otelconv.New
//	v, _ := webhook.NewVerifier(secrets, &webhook.VerifierOptions{Hooks: obs})
//	fetch, _ := webhook.NewRangeClient(base, apiKey, v, &webhook.RangeClientOptions{Hooks: obs})
//	tracker, _ := webhook.NewTracker(cursors, fetch, process, &webhook.TrackerOptions{Hooks: obs})
//	rc, _ := webhook.NewReceiver("we_123", v, tracker, &webhook.ReceiverOptions{Hooks: obs})
//
// Package webhooktest signs test payloads, builds signed requests and runs an in-memory producer with
// a range endpoint, for consumers' own tests.
package webhook
