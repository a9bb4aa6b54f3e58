// Package versioning serves several major versions of an API from one code base: the version is the
// first path segment (/v1/…), each licensee is pinned to a version, deprecated versions announce
// themselves and their sunset, and older versions are served by transforming the newest handler's
// output, one small named change at a time (Stripe's version-change modules). A complete server:
//
//	reg, err := versioning.NewRegistry(
//		[]versioning.Version{
//			{Name: "v1", Released: jan2025, Deprecated: jan2026, Sunset: jul2026,
//				DeprecationLink: "https://docs.example.com/upgrade/v2"},
//			{Name: "v2", Released: oct2025},
//		},
//		[]versioning.Change{{
//			Name: "order_side_renamed", Version: "v2", Object: "order",
//			Description: "An order's direction is called side.",
//			Response: func(o map[string]any) error { o["direction"] = o["side"]; delete(o, "side"); return nil },
//			Request:  func(b map[string]any) error { b["side"] = b["direction"]; delete(b, "direction"); return nil },
//		}})
//	if err != nil {
//		log.Fatal(err) // a version without a path from the newest, a sunset before its deprecation, …
//	}
//	pins, err := pgstore.NewPinStore(pool, nil)
//	if err != nil {
//		log.Fatal(err)
//	}
//	router, err := versioning.New(reg, &versioning.Options{
//		Pins:          pins,
//		Licensee:      apikey.RequestScope, // "sandbox:lic_42": sandbox and live pins are apart
//		AllowOverride: func(r *http.Request, _, _, _ string) bool { return sandbox.InSandbox(r) },
//		Hooks:         &versioning.Hooks{Decided: usage.Observe}, // usage is a versioning.UsageCounter
//		PinCacheTTL:   30 * time.Second,
//		Logger:        logger,
//		Problems:      problems, // the service's apierror.Writer (or set it once with problems.Handler)
//	})
//	if err != nil {
//		log.Fatal(err)
//	}
//	mux := http.NewServeMux()
//	mux.HandleFunc("POST /{version}/orders", createOrder) // writes the v2 shape only
//	mux.Handle("/{version}/version_pin", router.PinHandler())
//	mux.Handle("/{version}/changelog", router.ChangelogHandler())
//	handler := apierror.WithRequestID(auth.Handler(router.Handler(idem.Handler(problems.ServeMux(mux)))))
//
// # Versions and their lifecycle
//
// A Registry holds the versions — name, Released, Deprecated, Sunset, Successor — and the Changes
// between them, validated once by NewRegistry: well-formed unique names ("v" and a number), whole-second
// times, deprecation not before release, sunset not before deprecation, a successor that exists and
// is newer, exactly one newest version (not deprecated), and a chain of changes from the newest
// version to every older one. A mistake is an error wrapping a sentinel (ErrInvalidLifecycle,
// ErrNoPath, …) at start-up, never a surprise in production.
//
// A version answers from Released (inclusive) until Sunset (exclusive). Before its release and after
// it is removed from the registry it is unknown.
//
// # Wire format
//
// Every response on a known version echoes it:
//
//	X-SVC-Version: v1
//
// A version with a deprecation date adds, per RFC 9745 and RFC 8594:
//
//	Deprecation: @1767225600                          (Unix seconds of the deprecation)
//	Sunset: Wed, 01 Jul 2026 00:00:00 GMT             (HTTP-date of the sunset, when one is set)
//	Link: </v2/orders/ord_1>; rel="successor-version" (the same path on the successor that answers)
//	Link: <https://docs…/upgrade>; rel="deprecation"; type="text/html" (Version.DeprecationLink)
//
// The successor-version link names the nearest successor along the chain that is released and not
// sunset at that instant (or, failing that, the newest newer version that answers), and is left out
// when none does: following it never ends in a 404 or a 410. The 410's successor_version follows the
// same rule. It is also left out when the path holds a value shaped like a credential
// (apierror.LooksLikeCredential: an sk_live_ key pasted into a path): no response header repeats it.
//
// These headers are sent as soon as the date is in the registry, also before the deprecation
// instant: RFC 9745 allows a Deprecation date in the future ("will be deprecated at"), and a client
// should hear of a deprecation as early as possible. To announce later, add the date later. The
// Decision (and the telemetry) call a request deprecated from the deprecation instant on; from the
// sunset instant the version answers 410. Both dates are whole seconds, so the headers name exactly
// the instants the router acts on.
//
// Refusals are RFC 9457 problems (package apierror), each located at the path parameter "version":
//
//	404 version_unknown         the segment is not a supported version; "supported_versions": ["v2","v3"]
//	410 version_sunset          past the sunset; "successor_version": "v2", "supported_versions": […]
//	403 version_not_enabled     the licensee is pinned to another version; "pinned_version": "v1"
//	503 version_pin_unavailable the pin store failed; Retry-After; the request was not carried out
//
// An unknown segment is never echoed (no X-SVC-Version on a 404): it is untrusted input.
//
// # Pinning
//
// Options.Licensee, a conventions.CallerFunc, names the licensee of a request, normally from the
// principal that authentication put in the context; requests it names nobody for are not pinned, and
// its error is the answer. A licensee's first request pins it
// (PinNewest, Stripe's rule: to the newest released version; or PinRequested: to the version of
// that request unless it is deprecated). Afterwards a request on any other version is 403
// version_not_enabled naming the pin. Pins live behind the PinStore interface: MemoryPinStore by
// default, pgstore.PinStore for services with replicas; versioning/pintest is the conformance suite.
//
// The upgrade path is explicit: Router.Upgrade moves a pin forward (compare-and-swap, safe against
// racing replicas), Router.Rollback takes the last upgrade back within the rollback window,
// Router.Repin moves it anywhere (support's tool, at any time), and Router.PinHandler is the
// licensee's own endpoint (GET the pin, POST {"version":"v3"} to upgrade or to roll back), to mount
// on the API, for example at "/{version}/version_pin". A pin whose version has been sunset
// or removed does not lock its licensee out: the next request on a newer version moves it there.
// Options.AllowOverride lets chosen requests (the sandbox's) use another version once without
// moving the pin. Options.PinCacheTTL saves the store round trip; a cached pin is only trusted when
// it agrees with the request, so an upgrade takes effect at once everywhere.
//
// A UsageCounter, its Observe set as Hooks.Decided, counts every request on a known version by
// licensee and version (served, refused, deprecated, first and last seen): it tells who still calls a
// deprecated version before its sunset; Router.Pins lists who is pinned to it, webhook-only
// licensees included.
//
// # Rolling an upgrade back
//
// An upgrade that breaks a licensee's integration need not wait for support: for
// Options.RollbackWindow after it (DefaultRollbackWindow, 72 hours, when zero; negative turns this
// off) the licensee may move its pin back to where it came from, once. Every move records the
// version it came from as Pin.Previous, in the same compare-and-swap that moves the pin, and the
// pin endpoint shows it with the window's end while a rollback is possible:
//
//	GET  /v3/version_pin → {"version":"v3","previous_version":"v2","rollback_until":1770206400,…}
//	POST /v3/version_pin {"version":"v2"} → 200 {"version":"v2","previous_version":"v3",…}
//
// After the rollback the pin's previous version is the newer one, so there is nothing left to roll
// back: asking for an older version again is a plain 400 version_downgrade, and asking for v3 is a
// new upgrade with a window of its own. Asked for after the window closed, the previous version
// gets 409 version_upgrade_final, located at /version, whose detail says when the upgrade became
// final (ErrRollbackExpired); a rollback_until never outlives the previous version's sunset.
// Router.Rollback makes the same move without HTTP. Every move is a compare-and-swap on the pin it
// was decided on: of concurrent rollbacks exactly one moves the pin, and a rollback racing an
// upgrade either comes first or finds its version no longer the previous one; never two rollbacks.
//
// # Changelog
//
// Router.ChangelogHandler serves the changelog from the registry itself — the released versions,
// newest first, with their dates and each Change's Name, Object and Description in definition
// order — so it cannot drift from what the router does. Mount it behind the router, for example
// at "/{version}/changelog" (it answers GET and HEAD, and 405 otherwise):
//
//	{"object":"list","data":[{"object":"api_version","version":"v2","released":1759276800,
//	  "changes":[{"name":"order_side_renamed","resource":"order","description":"An order's direction is called side."}]},
//	 {"object":"api_version","version":"v1","released":1735689600,"deprecated":1767225600,"sunset":1782864000,"changes":[]}]}
//
// Its body is the same on every version: the router does not reshape it.
//
// # Observing
//
// Options.Hooks are told about every request the router decides, unknown versions included, as an
// Observation — the instant, the registered version (never the segment a client wrote when it names
// none), its Lifecycle (current, deprecated, sunset, unknown), the Outcome (served, override, or the
// refusal), the licensee and pin, and how long the decision took by Options.Now. Hooks is a struct
// of optional funcs, like net/http/httptrace.ClientTrace: a field left nil is skipped, and a field
// added later is nil in hooks written before it. They run on the request's goroutine and must not
// block; with no Hooks nothing is called, at no cost. The otelconv module fills them with
// OpenTelemetry (Telemetry.Versioning); to keep a UsageCounter as well, call both from one func:
//
//	otel := tel.Versioning() // nil only for a nil Telemetry
//	hooks := &versioning.Hooks{Decided: func(ctx context.Context, o versioning.Observation) {
//		usage.Observe(ctx, o)
//		otel.Decided(ctx, o)
//	}}
//
// # Changes
//
// Handlers produce only the newest shape. Each breaking change is a Change introduced by a version:
// Response maps that version's response shape to the previous version's, Request maps a request body
// the other way (older client → newest handler), Event maps a webhook event's type and data. A
// Change scoped to an Object ("order") applies its Response to every JSON object whose "object"
// member matches, wherever it appears — in lists, nested, and in webhook payloads — so a resource
// has one shape per version everywhere. For a request on an older version the router buffers the
// newest handler's JSON response, applies the chain newest-first and writes it with the handler's
// status and headers and a correct Content-Length (validators such as ETag are dropped: they
// describe the newest body). Only application/json bodies are shaped; problem+json is the same in
// every version, and a body signed with X-SVC-Signature (range retrieval) goes out byte for byte:
// its signer rendered it for the licensee's version (Router.EventRenderer). Numbers keep every digit
// (they are never float64). Transforms run on an encoding/json-compatible codec without reflection;
// BenchmarkTransform2KiB measures them.
//
// Each change has a golden test: versiontest.Golden checks every registered change against
// testdata/<change>/{response,request,event}.{newer,older}.json and fails on a missing file, a
// difference, or a transform that changes nothing. Registry.RenderEvent renders a stored webhook
// event at a licensee's pinned version; Router.RenderEvent looks the pin up,
// and Router.EventRenderer is that hook as a producer.RenderFunc for the Dispatcher and the
// RangeHandler.
//
// # Putting it together
//
// Order the middleware as the server above does: request IDs, then authentication (so the Licensee
// function sees the principal),
// then the versioning Router, then idempotency (so stored responses are in the newest shape and
// every replay is shaped for the version it is made on), then the handlers. Compression belongs
// outside the router: an encoded body cannot be shaped.
//
// Mux patterns may carry the version ("POST /v1/orders"), a wildcard ("POST /{version}/orders"), or
// none at all with Options.StripVersion ("POST /orders"); versioning.FromContext tells a handler
// which version it serves, and the rest of the router's Decision. A version with its own Version.Handler is dispatched there instead and not
// shaped, for the rare version that cannot be expressed as a transform.
package versioning
