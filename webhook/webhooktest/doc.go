// Package webhooktest helps consumers test their webhook receivers: it signs payloads the way the
// platform does, builds signed delivery requests, and runs an in-memory producer (Source) that emits
// events, delivers them in any order the test likes, and serves the signed range endpoint that gap
// recovery calls.
//
//	secret := webhook.NewSecret()
//	src := webhooktest.NewSource(secret, "sk_sandbox_test", nil)
//	src.Emit("we_1", "order.created", map[string]any{"id": "ord_1"})
//	src.Emit("we_1", "order.paid", map[string]any{"id": "ord_1"})
//	rec := src.Deliver(myReceiver, "we_1", 2) // 1 was "dropped": the receiver must fetch it
//
// Everything here panics on misuse (an empty secret, data that cannot be marshalled), like
// net/http/httptest: these are test helpers, and a panic points at the broken test line.
package webhooktest
