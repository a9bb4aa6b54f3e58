// Package portal serves the webhook portal: the web page where a platform's customer registers its
// webhook endpoints, picks their event types, edits them, disables and enables them, deletes them,
// rolls their signing secret, watches deliveries, resends an event, recovers a range, reads the event
// catalogue and, in the sandbox, injects faults and sends test events. It is an http.Handler a
// platform mounts in its own server, beside its API:
//
//	p, err := portal.New(&portal.Options{
//		API:     authenticated,                      // the API below the apikey.Authenticator
//		BaseURL: "https://api.example.com/portal",
//		Store:   store,                              // nil: in memory; pgstore/redisstore for replicas
//	})
//	mux.Handle("/portal/", p)
//	api.Handle("POST /portal_sessions", idem.Handler(p.SessionsHandler(problems)))
//
// # Sessions
//
// A platform mints a link for the principal of an API key (SessionsHandler answers POST
// /v1/portal_sessions with it; NewLink is the same from Go): 256 random bits, of which the Store keeps
// only a hash, valid once and for Options.LinkTTL (10 minutes). Opening it shows a button; pressing it
// spends the link and starts a session — an HttpOnly, SameSite=Strict cookie, Secure and __Host-
// prefixed on https — that lasts Options.SessionTTL (an hour) and ends at sign-out. The button is there
// so that a mail scanner or a chat's link preview, which fetch the link, do not spend it. A session is
// the key's principal: its licensee and environment, its permissions, and the API version the link
// was minted at (the licensee's pinned one).
//
// # One code path
//
// The portal keeps no rule of its own. Every page reads, and every form acts, through Options.API —
// the platform's API handler, called in process with the session's principal in the request context
// — at the documented routes of producer.EndpointsHandler, producer.DeliveriesHandler,
// producer.RangeHandler and the sandbox.Controls. An action goes through the same validation,
// permissions, tenancy, rate limit, idempotency and request log as the same request sent with the key,
// and what the API refuses is shown from its problem body, each violation next to the field it names.
// Each form carries an Idempotency-Key drawn when it was shown, so a form sent twice (a double click,
// a reload) acts once.
//
// # Security
//
// Pages are server-rendered with html/template, which escapes every value a tenant controls
// (descriptions, URLs, headers, payloads, response snippets) for where it lands; assets are embedded.
// Every answer carries a strict Content-Security-Policy (no inline script or style, nothing from
// another origin, forms only to the portal), frame-ancestors 'none' and X-Frame-Options: DENY unless
// Options.FrameAncestors names the origins that may frame it, nosniff, no referrer and no-store. A form
// posted from another origin is refused (http.CrossOriginProtection). The pages work without
// JavaScript; the one script adds a copy button.
package portal
