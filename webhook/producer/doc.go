// Package producer is the sending half of the platform's webhooks (docs/spec.md part 6,
// docs/decisions.md D3): a durable event log with gap-free per-endpoint sequences, a dispatcher that
// delivers signed events and retries them, and the range endpoint a consumer uses to fetch what it
// missed. The consumer half — verifying, ordering, gap recovery — is package webhook. A complete
// producer:
//
//	eps, _ := memstore.NewEndpoints(producer.Endpoint{
//		ID: "we_123", URL: "https://consumer.example/hooks", Owner: "lic_1",
//		Secrets: []string{secret}, APIVersion: "v1",
//	})
//	events, err := pgstore.NewEventLog(pool, nil) // or memstore.NewLog()
//	if err != nil { … }
//	pub, err := producer.NewPublisher(events, eps, nil)
//	if err != nil { … }
//
//	d, err := producer.NewDispatcher(events, eps, &producer.DispatcherOptions{Logger: logger})
//	// (a consumer on loopback, in a demo: Guard: &ssrf.Guard{Allow: …127.0.0.0/8…})
//	if err != nil { … }
//	go d.Run(ctx) // stops, settling what is in flight, when ctx is cancelled
//
//	// Range retrieval and the delivery history answer on every API version: behind a
//	// versioning.Router with StripVersion, mount the version-free patterns once (without one, mount
//	// RangePattern(v) for each version v). Rendering at the pinned version is the router's
//	// EventRenderer.
//	ranges, err := producer.NewRangeHandler(events, eps, apikey.RequestScope, // who the caller is
//		&producer.RangeHandlerOptions{Render: router.EventRenderer(nil), Problems: problems})
//	if err != nil { … }
//	deliveries, err := producer.NewDeliveriesHandler(events, eps, apikey.RequestScope, nil)
//	if err != nil { … }
//	mux := http.NewServeMux()
//	mux.Handle(producer.RangePattern(""), ranges)
//	mux.Handle(producer.DeliveriesPattern(""), deliveries)
//	api := router.Handler(problems.ServeMux(mux)) // the mux's own 404 and 405 as problems
//
//	// In a handler, inside the transaction that creates the order (the outbox):
//	tx, _ := pool.Begin(ctx)
//	… INSERT the order …
//	_, err = pub.WithLog(events.WithDB(tx)).Publish(ctx, "we_123", "order.created", order)
//	… tx.Commit(ctx): the order and its event commit together, or neither does
//
// # The pieces
//
//   - A log (driver.Log) stores the events of one stream per webhook endpoint, numbered 1, 2, 3, …
//     with no gaps and no reuse, and the delivery state of each. memstore.NewLog is the in-memory one;
//     pgstore.EventLog keeps events and delivery state in PostgreSQL, survives restarts, is shared by
//     replicas, and can append inside the caller's transaction (the transactional outbox).
//   - An endpoint registry (driver.Endpoints) looks up an Endpoint: URL, signing secrets, owning
//     licensee, pinned API version; a driver.EndpointLister also lists a licensee's endpoints.
//     memstore.NewEndpoints is an in-memory registry and pgstore.EndpointStore a PostgreSQL one.
//
// Package driver specifies what a log and a registry must do, package memstore holds the in-memory
// ones and package drivertest is the conformance suite every implementation runs; a team that only
// publishes and delivers never imports driver or drivertest.
//
//   - Publisher stamps and appends an event: Publish(ctx, endpointID, "order.created", order), or
//     PublishToOwner(ctx, licensee, …) for every endpoint of a licensee at once (see below), or
//     PublishToEach for endpoints the caller already holds.
//   - Sequencer numbers the events of a Sequencing log after they commit (see below); a Dispatcher
//     runs one itself.
//   - Dispatcher delivers due events, retries failures on a schedule, and applies the retention.
//   - RangeHandler serves GET /v1/webhook_endpoints/{id}/events?from=&to=&limit=.
//   - EndpointsHandler serves the endpoint lifecycle on a registry that lists and edits
//     (driver.EndpointEditor): register, list, get, update, delete, roll_secret and the event
//     catalogue (see below).
//
// # The endpoint lifecycle
//
// An endpoint receives the event types it subscribes to (Endpoint.EnabledEvents; every type by
// default), and each stream numbers only what it receives, so subscriptions never open a gap. A
// disabled endpoint (DisabledReason) is pushed nothing: its events are still appended and numbered,
// its due deliveries are abandoned unsent (ClassEndpointDisabled in the history), and when it is
// enabled again the next delivery's sequence shows the consumer the gap, which it fetches by range —
// nothing is lost silently and nothing floods it. A deleted endpoint (DeletedAt) gets no event and no
// delivery (one already in flight finishes and its outcome is recorded), but Lookup still returns it,
// so its owner reads its stream by range until the retention removes it. A secret roll puts the new
// secret first and keeps the old one until OldSecretsExpire: deliveries and range pages carry a v1
// signature for each until then, so a consumer switches at its own pace —
//
//	// the consumer's side of a roll: accept both while the overlap lasts, then the new one only
//	v, err := webhook.NewVerifier([]string{newSecret, oldSecret}, nil)
//
// Every change is one atomic UpdateEndpoint of the registry, read by the Dispatcher and the range
// handler at their next delivery or request on every replica: nothing is cached past it. A team
// mounts the whole API in a few lines:
//
//	eh, err := producer.NewEndpointsHandler(registry, apikey.RequestScope, &producer.EndpointsHandlerOptions{
//		EventTypes: []producer.EventType{{Type: "order.created", Description: "…", Schema: "#/components/schemas/Order"}},
//		URLPolicy:  func(*http.Request) ssrf.URLPolicy { return ssrf.URLPolicy{} },
//		APIVersion: func(r *http.Request) string { return pinnedVersion(r) },
//	})
//	if err != nil { … }
//	eh.Register(mux, "", idem.Handler) // writes behind the idempotency middleware
//
// # Bounds
//
// One licensee cannot exhaust what every licensee shares. The Publisher refuses an event whose
// envelope would exceed PublisherOptions.MaxEventBytes (default 256 KiB, a quarter of a consumer's
// 1 MiB cap) with ErrEventTooLarge, before anything is appended. A Log may keep at most a number of
// events per stream (memstore.Log.MaxStreamEvents, pgstore.EventLogOptions.MaxStreamEvents): an append
// past it fails with ErrStreamFull and appends nothing, and retention frees the room of the events
// it removes. With the endpoints per licensee bounded at registration, that bounds what one licensee
// stores: endpoints × MaxStreamEvents × MaxEventBytes. Range pages are bounded as described under
// Range retrieval.
//
// # Fan-out to a licensee's endpoints
//
// A business event usually concerns a licensee, not one endpoint: an order of lic_1 goes to every
// webhook endpoint lic_1 registered. PublishToOwner does that through the registry itself, so no team
// keeps an owner index of its own:
//
//	evs, err := pub.PublishToOwner(ctx, "lic_1", "order.created", order)
//
// It lists the owner's endpoints (in ascending order of ID) and appends one event to each: the same
// type, data and creation time, but an ID of its own and the next place in that endpoint's own stream,
// so each endpoint keeps its gap-free sequence and its consumer sees only its own numbers. On a
// BatchAppender log the events go in one call, all or none — one INSERT on pgstore.EventLog, however
// many endpoints. An owner without endpoints publishes nothing and is not an error (an empty slice);
// the event is checked all the same. The registry must be an EndpointLister (ErrNoListing otherwise,
// never a silent no-op), and an owner with more than PublisherOptions.MaxFanOut endpoints (default
// DefaultMaxFanOut, 64) is refused with ErrFanOutLimit rather than turning one order into hundreds of
// requests; bound the endpoints per licensee at registration, where the licensee can be told.
//
// In the transactional outbox the listing belongs in the order's transaction too, so that the
// endpoints read and the events appended are one snapshot and commit or roll back with the order:
//
//	tx, _ := pool.Begin(ctx)
//	… INSERT the order …
//	eps, _ := pgstore.NewEndpointStore(tx, nil)
//	_, err = pub.WithLog(events.WithDB(tx)).WithEndpoints(eps).
//		PublishToOwner(ctx, "lic_1", "order.created", order)
//	… tx.Commit(ctx): two statements for the events, whatever the number of endpoints
//
// # Numbering after the commit
//
// A stream's sequences are gap-free, so its events are numbered one after the other. Numbering inside
// the appending transaction — the obvious design — makes every order of a licensee wait for the
// previous order's commit on the stream's counter: one busy licensee is capped at one commit at a
// time, whatever the hardware. pgstore.EventLog therefore numbers after the commit (a Sequencing
// log): Append stores the event unnumbered, in the caller's transaction and locking no shared row,
// and returns it with Sequence 0; a Sequencer then numbers committed events in batches, oldest
// first, one short transaction per batch. Every promise stays: sequences start at 1, have no gap and
// are never reused, an event exists if and only if its transaction committed, and a stream's events
// appended one after the other keep their order. Until it is numbered an event is invisible to
// Range, Claim and Status, so deliveries and range retrieval only ever see numbered events.
//
// Sequencers on several replicas share the work: a sequencer takes a stream's numbering lock for the
// length of its batch's transaction, tried and never waited for, so one stream is numbered by one
// sequencer at a time and the others move on to other streams; a sequencer that dies mid-batch rolls
// back whole, leaving neither a gap nor a number given twice. The Dispatcher's Sequencer wakes when
// Dispatcher.Wake is called — after a commit that appended events — and otherwise polls
// (DefaultSequencePoll); under load it runs back to back. There is deliberately no LISTEN/NOTIFY: a
// transaction that sends NOTIFY takes a database-wide lock at commit (PostgreSQL queues notifications
// in commit order), which would serialize every order's commit again. A replica that appends without
// calling Wake is covered by the poll, and by any sequencer that is busy: one that numbered something
// looks again at once. memstore.DeferredLog numbers the same way in memory, for tests of code that must
// work with Sequence 0 at Append.
//
// # Delivery
//
// Each event is POSTed to its endpoint's URL:
//
//	POST /hooks/orders HTTP/1.1
//	Content-Type: application/json
//	X-SVC-Signature: t=1767225602,v1=5f1c…,v1=0b9e…
//	X-SVC-Sequence: 7
//
//	{"object":"event","id":"evt_…","endpoint":"we_123","sequence":7,"type":"order.created","created":1767225600,"api_version":"v1","data":{…}}
//
// The signature is HMAC-SHA256 over "<t>.<body>" with one v1 per endpoint secret: while a secret
// rotates the endpoint has two, and the consumer may hold either. The sequence header equals the
// body's, and the body names the endpoint it was signed for, so a delivery captured on its way to one
// endpoint is refused by another that shares the secret (webhook.ReceiverOptions). Any 2xx is
// success. Anything else — another status (redirects are not followed), a transport error, or the
// per-request timeout (10 s) — is a failed attempt, retried after the schedule's next delay with
// ±20 % jitter; DefaultSchedule doubles from one minute to twelve hours, 72 hours in all, then the
// delivery is abandoned (the event stays retrievable by range).
//
// Each endpoint progresses on its own. A claim takes at most StreamBatch due deliveries of one
// endpoint, and only from endpoints nobody holds; each endpoint's run goes to a worker of its own, in
// sequence order, and stops at the first failure (the rest wait for its retry). The dispatcher claims
// again as soon as a claim came back full or a worker finished a full run, never waiting for the
// slowest endpoint. Workers, PerOwner (32) and PerEndpoint (1) bound the requests in flight in all,
// per licensee and per endpoint, so that one licensee's slow or failing endpoints delay only its own
// deliveries. Beyond that, order is the consumer's sequence check's and range fetch's to restore.
//
// Every attempt is recorded right after it is made, each record with its own deadline, and retried
// until it is stored: a delivery the consumer acknowledged is never sent again because a store call
// timed out. Records that are ready at the same moment go to the Log in one call when it is a Settler
// (pgstore.EventLog: one statement and one commit for many deliveries). The delivery history keeps
// every attempt — when, status code, latency, error class, the first 256 bytes of the answer — for as
// long as its event, and Log.Attempts and DeliveriesHandler list it:
//
//	GET /v1/webhook_endpoints/we_123/deliveries?sequence=7&outcome=failed&limit=20&starting_after=att_4417093326815720611
//
// Several Dispatchers may share one Log: a claim leases each delivery, and an endpoint has one holder
// at a time, so no two deliver to it at once; a fencing token makes a stale holder's outcome fail
// with ErrLeaseLost. A dispatcher that dies holds its endpoints only until the lease ends. Every
// delivery request's context carries its endpoint ID (EndpointIDFromContext), for transports that act
// per endpoint — the sandbox's fault injector, per-endpoint metrics.
//
// # Observing
//
// PublisherOptions.Hooks, DispatcherOptions.Hooks and RangeHandlerOptions.Hooks take Hooks (package
// otelconv fills them on OpenTelemetry); nil costs nothing, not one allocation. The Publisher asks them for the
// publishing request's trace context (W3C traceparent and tracestate) and the Log stores that with
// each event — memstore.Log in memory, pgstore.EventLog in two nullable columns — so that every delivery
// attempt, minutes or days later and on any replica, can link its span to the request that published
// the event. Each attempt is bracketed by AttemptStart and AttemptEnd (delivered, failed with a retry
// scheduled, abandoned, or released by a shutdown; the status code, the failure's class and the
// latency), and InjectTrace writes the attempt's own traceparent into the delivery request, so that
// the consumer's trace continues the attempt's; RangeStart and RangeEnd bracket each range request,
// so that serving it continues the consumer's fetch. Dispatcher.Backlog reports each endpoint's
// undelivered events and the age of the oldest, for a gauge read at a collector's pace.
//
// # Endpoints customers type in
//
// The default delivery client (ssrf.NewClient) dials only public unicast addresses, checked after
// DNS resolution at the moment of dialling, so that neither a URL naming an internal address nor a
// name that later resolves to one reaches inside the network: loopback, private, link-local, ULA,
// CGNAT, multicast, unspecified, reserved, and the IPv4-mapped and NAT64 forms of them are refused,
// and the attempt is recorded as blocked_address. ssrf.Guard's allow-list opens what the sandbox,
// tests or a demo on loopback need, as narrowly as they need it: prefixes (any port), address:port
// pairs, and host names (optionally with a port) that registration accepts — a listed name still
// reaches only addresses the list allows. An answer from a destination that only the allow-list
// admits is recorded by its status alone, never its body. Guards are per environment:
// DispatcherOptions.ClientFor sends a production endpoint through a client whose guard opens nothing
// the sandbox's does, and each environment's ssrf.URLPolicy carries that environment's guard.
// ssrf.URLPolicy.Check gives registration its
// located errors first: https unless allowed otherwise, no userinfo, no fragment, at most 2048 bytes,
// no IP literal — in any spelling, 2130706433 and 0x7f.1 included — in a blocked range.
//
// Events are stored at the version they were produced at and rendered at each endpoint's pinned
// version on the way out, in deliveries and range responses alike, through the Render hook (a
// RenderFunc, such as an adapter around the versioning package's RenderEvent).
//
// # Range retrieval
//
//	GET /v1/webhook_endpoints/we_123/events?from=5&to=7&limit=100
//
//	HTTP/1.1 200 OK
//	Content-Type: application/json
//	X-SVC-Signature: t=1767225700,v1=…
//
//	{"object":"list","data":[{"object":"event","id":"evt_…","sequence":5,…},{…6…},{…7…}],"has_more":false}
//
// from is required; to defaults to the newest event; limit is 1–1000, default 100. The range is
// inclusive and ascending, has_more says whether events in the range follow the page, and the body is
// signed like a delivery. A page is bounded by bytes too (RangeHandlerOptions.MaxPageBytes, default 4 MiB,
// a RangeClient's own cap on a response): it ends early, with has_more true, before its body would
// pass the budget, and always holds at least one event, so a consumer never gets a page it must
// refuse. The events are read from the Log within that budget (ByteRanger), so one request holds
// about twice the budget at most, and a licensee has at most RangeHandlerOptions.MaxInFlight requests (4)
// served at once — one more is 429 range_requests_in_flight with Retry-After — so that concurrent
// pages of large events cannot exhaust the process that serves every licensee. Bad parameters are 400 problems located at the parameter (not_an_integer,
// out_of_range, range_inverted at to, query_repeated, query_missing). An unknown endpoint and another
// licensee's endpoint are the same 404 webhook_endpoint_not_found. Events are kept 30 days; a range
// starting below the retained window is:
//
//	HTTP/1.1 410 Gone
//	Content-Type: application/problem+json
//
//	{"type":"https://svcplatform.dev/problems/events_pruned","title":"Gone","status":410,
//	 "detail":"events 1–41 of webhook endpoint \"we_123\" are past the retention window and gone; the first retained sequence is 42",
//	 "code":"events_pruned","request_id":"req_…",
//	 "errors":[{"location":"query","name":"from","code":"events_pruned","detail":"must be at least 42, the first retained sequence"}],
//	 "first_retained":42}
//
// Example (the package example) runs the producer above with the in-memory log against a consumer built from
// package webhook.
package producer
