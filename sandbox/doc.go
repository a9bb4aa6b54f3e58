// Package sandbox is the platform's sandbox: what one build serves to sandbox keys only — the
// sandbox-only controls (trigger test events, inject webhook faults, reset an evaluation's data), a
// transport that applies those faults to the webhook producer's deliveries so consumer developers can
// prove their gap recovery, and InSandbox, the test for sandbox-only behaviour. The environment comes
// from the API key alone (package apikey). A complete server:
//
//	issuer, err := apikey.NewIssuer(nil, &apikey.IssuerOptions{SandboxBaseURL: "https://sandbox.example.com"})
//	faults := &sandbox.FaultTable{}
//	// The sandbox endpoints' deliveries go through the faults, then the sandbox's SSRF guard.
//	transport, err := sandbox.NewFaultTransport(ssrf.NewTransport(sandboxGuard), faults, nil)
//	dispatcher, err := producer.NewDispatcher(log, endpoints, &producer.DispatcherOptions{
//		ClientFor: func(ep producer.Endpoint) *http.Client { … &http.Client{Transport: transport} for a sandbox owner's }, …})
//
//	controls, err := sandbox.NewControls(sandbox.Hooks{
//		Trigger: func(ctx context.Context, p apikey.Principal, req sandbox.TriggerRequest) ([]sandbox.Triggered, error) {
//			return publishTestEvent(ctx, p, req) // through the normal delivery path
//		},
//		SetFaults: func(ctx context.Context, p apikey.Principal, id string, f sandbox.Faults) error {
//			if !ownsEndpoint(ctx, p, id) {
//				return sandbox.ErrUnknownEndpoint
//			}
//			return faults.Set(id, f)
//		},
//		Reset: func(ctx context.Context, p apikey.Principal) error {
//			return deleteScope(ctx, p.Scope()) // the application's own records of this evaluation
//		},
//	}, &sandbox.ControlsOptions{NotFound: problems.NotFoundHandler()})
//	mux.Handle("/v1/sandbox/", controls) // a production key gets the same 404 as an unknown route
//
//	auth, err := apikey.NewAuthenticator(issuer, nil) // (each err checked: none panics)
//	versioning.Options{…, AllowOverride: func(r *http.Request, _, _, _ string) bool { return sandbox.InSandbox(r) }}
//	http.ListenAndServe(addr, apierror.WithRequestID(problems.Handler(auth.Handler(mux))))
//
// # Environments
//
// A request is in the sandbox exactly when the principal the apikey.Authenticator resolved its key to
// is of apikey.Sandbox: InSandbox(r). Sandbox and production data never mix when the application
// keeps its records under the principal's scope (apikey.Principal.Scope, "sandbox:lic_42"). The
// sandbox has no rate ceiling (apikey.RateLimitKey exempts it), so a load test against it measures the
// build, not a throttle.
//
// # Sandbox controls
//
// Controls serve, for sandbox keys only:
//
//	POST   /v1/sandbox/events                          {"type":"order.created","endpoint":"we_…","data":{…}} (all optional)
//	PUT    /v1/sandbox/webhook_endpoints/{id}/faults   {"drop":0.2,"duplicate":0.1,"reorder":0.1,"bad_signature":0.05,"delay":0.1,"delay_ms":2000}
//	DELETE /v1/sandbox/webhook_endpoints/{id}/faults
//	POST   /v1/sandbox/reset
//
// A production key gets exactly the 404 of an unknown route on every one of them. Fault rates are in
// [0, 1] and delay_ms at most 30000; violations are 400 problems located at the member (/drop, …).
// The application wires the controls through Hooks; a hook refuses with a 4xx *apierror.Error (a
// quota reached, an event too large) and must then have done nothing. Behind the idempotency
// middleware, every refusal — invalid input, an endpoint that is not the caller's, a hook's 4xx — is
// released rather than stored as the Idempotency-Key's response (idempotency.NotPerformed), so the
// same key runs the request once its cause is gone; a 5xx is stored like any completed answer.
//
// # Webhook faults
//
// FaultTransport, the webhook producer's transport, applies the faults a FaultSource (a FaultTable)
// sets per endpoint: drop (answer 200, send nothing), duplicate, reorder (hold until the endpoint's
// next delivery, HoldFor, Flush or Close), delay and bad signature (every v1 corrupted). It finds the
// endpoint in the context producer.Dispatcher gives each delivery; a made-up answer carries
// X-SVC-Sandbox-Fault. Its randomness can be seeded for reproducible runs. Package sandbox/sandboxtest
// wraps all of this in an in-process producer for consumers' own Go tests.
package sandbox
