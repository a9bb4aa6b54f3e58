// Command svc is the consumer developer's command line for any API built with
// github.com/svcplatform/conventions — the reference order server first. It is built from the
// standard library and this library alone:
//
//	go install github.com/svcplatform/conventions/cmd/svc@latest
//
// # Commands
//
//	svc listen --endpoint we_… --forward-to http://localhost:3000/hook
//	svc trigger order.created [--endpoint we_…] [--data JSON]
//	svc events --endpoint we_… --from N [--to M] [--json]
//	svc events resend --sequence N [--endpoint we_…]
//	svc events recover --from N --to M [--endpoint we_…]
//	svc verify --signature 't=…,v1=…' [--body FILE]   (or the body on stdin)
//	svc endpoints create --url URL [--events TYPE,…] [--description D] [--metadata K=V]… [--header NAME=VALUE]… [--export]
//	svc endpoints list
//	svc endpoints get [--endpoint we_…]
//	svc endpoints update [--endpoint we_…] [--url U] [--events TYPE,…|'*'] [--description D] [--endpoint-api-version V] [--rate-limit N|none] [--metadata K=V]… [--header NAME=VALUE]…
//	svc endpoints disable | enable | delete [--endpoint we_…]
//	svc endpoints roll-secret [--endpoint we_…] [--expires-in 24h] [--export]
//	svc endpoints stats [--endpoint we_…]
//	svc requests list [--status 4xx|404] [--code C] [--key key_…] [--route 'POST /v1/orders'] [--since 1h|TIME] [--until 1h|TIME] [--limit N] [--all] [--starting-after req_…]
//	svc requests get REQUEST_ID
//	svc version-pin show
//	svc version-pin upgrade VERSION
//	svc version-pin rollback
//	svc changelog [--version V]
//	svc portal
//	svc event-types
//	svc keys list
//	svc keys create [--permission RESOURCE:read|write]… [--export]
//	svc keys get KEY_ID
//	svc keys revoke KEY_ID
//	svc keys roll KEY_ID [--expires-in 24h] [--export]
//	svc orders create --account ACC [--side buy|sell] [--idempotency-key K]
//	svc faults set --endpoint we_… [--drop R] [--duplicate R] [--reorder R] [--bad-signature R] [--delay R --delay-ms MS]
//	svc faults clear --endpoint we_…
//	svc credentials new [--export]   (admin)
//	svc version
//
// "svc help" lists them; "svc <command> --help" describes each, with its flags.
//
// listen follows the endpoint's events through range retrieval, so the developer's machine needs no
// public URL. It verifies every page's X-SVC-Signature with the endpoint's secret and forwards each
// event to the local URL as the platform delivers it — the envelope as body, X-SVC-Sequence, and a
// fresh X-SVC-Signature made with the secret — in sequence order, one at a time, retrying each
// (with backoff) until the local URL answers 2xx. It prints one line per attempt (--json: one JSON
// object). Its cursor, the last sequence answered 2xx, is written to disk durably (fsync of the file
// and its directory) after each delivery and before the next, and locked (flock) while listen runs,
// so a listen stopped and started again resumes without loss or duplicates, and a second listen on
// the same cursor is refused. Ctrl-C or SIGTERM stops it once the delivery in flight is answered; a
// second interrupt stops it at once, and that delivery, like one a SIGKILL interrupts, is forwarded
// again by the next listen: the receiver's sequence rule (an old sequence is a duplicate) absorbs it.
// Events pruned past the cursor stop listen with exit status 5 rather than being skipped silently,
// and so does a cursor ahead of the stream's newest event. Cursors live in a directory only the user
// can write (created 0700), and the cursor, its lock and its temporary files are opened without
// following links and must be the user's: a cursor planted by someone else, or a link to one, is
// refused (exit status 2), since it would make listen skip events.
//
// The endpoint commands manage the endpoint lifecycle the reference server serves
// (producer.EndpointsHandler). update sends a JSON merge patch of only the settings given: --metadata
// and --header change one pair each, and KEY= removes one. The endpoint's own API version is
// --endpoint-api-version, since --api-version is every command's version segment. roll-secret prints
// the new secret once; the old one signs beside it until --expires-in has passed (the server's default
// is a day), so every delivery and range page carries two v1 signatures meanwhile, and receivers
// holding either secret verify. listen, holding the old secret, keeps verifying and says once, on
// stderr, that the secret was rolled: a page verified, but its newest v1 was made with a secret
// listen does not hold.
// delete stops an endpoint's events and deliveries; the events it has stay readable by range until
// the server's retention removes them.
//
// The keys commands manage the licensee's API keys (apikey.KeysHandler on the server). create and
// roll print the new key's secret once, with a warning on stderr to store it: the server keeps only
// its hash, and a replay of the request (--idempotency-key) cannot show it again. --permission
// restricts a new key (repeatable; write includes read); without it the key has the permissions of
// the key that asks. roll keeps the old key working for --expires-in (the server's default is a day,
// 0s ends it at once), so a deployment switches keys without downtime. list and get never show a
// secret; last used is to the minute.
//
// The requests commands read the request log (requestlog.RequestsHandler on the server): what
// became of a request, by the ID every answer carries in X-Request-Id and every problem in its
// request_id. list filters by status (404) or class (4xx), problem code, API key ID (--key takes the
// key's ID, key_…; a value shaped like a secret is refused and not repeated), route pattern and time
// (--since and --until: a duration back from now, or an RFC 3339 time), newest first, one page or,
// with --all, every page by starting_after, up to 10,000 requests. get prints every field.
//
// The version-pin commands show and move the API version the key's licensee is pinned to
// (versioning.Router.PinHandler). upgrade moves it forward; rollback reads the pin and, when its
// last move was an upgrade still within the rollback window, moves it back to previous_version;
// otherwise it says why (never moved, the window closed, the previous version no longer served, the
// last move not an upgrade) without sending anything, and exits with status 3. A pin move changes
// the version in svc's own paths: svc says what SVC_API_VERSION must become. Sent again with its
// --idempotency-key, a rollback whose answer was lost is the same request as the first, on the same
// path, and the server replays its answer. changelog prints every version, newest first, with its
// release, deprecation and sunset dates and the changes it introduced (--version: one).
//
// portal prints a one-time link to the webhook portal (package portal on the server), the web page
// where the key's licensee manages its endpoints and watches its deliveries, with the key's
// permissions; only the link goes to stdout, so that xdg-open "$(svc portal)" opens it. The link is a
// credential and works once: a replay of the request (--idempotency-key) cannot show it again.
//
// Every mutating command sends an Idempotency-Key (a fresh UUID unless --idempotency-key names one)
// and retries network errors, 409, 429 and 5xx on that key through idempotency.Transport, so a command
// run once does its work at most once; when the answer is lost, svc prints the key to send again. A
// 409 other than idempotency_key_in_use (version_upgrade_final, say) is the server's final word on
// the resource's state: svc prints it as a refusal (exit status 3), without the key.
//
// # Output
//
// svc prints what servers send (IDs, URLs, event types and data, problem details), and a server must
// not reach the terminal through it. Every byte svc writes passes through one filter: only valid
// UTF-8 of graphic characters, newlines and tabs gets through, and anything else — control
// characters (ESC, BEL, CR, DEL), C1 controls such as CSI (U+009B) and OSC (U+009D), bytes that are
// not UTF-8, bidi overrides (U+202E) and every other format character, line separators, private-use
// and unassigned code points — is printed as U+FFFD. --json output is JSON with those characters
// written as \u escapes inside its strings instead, so it passes unchanged and a program reading it
// gets every value exactly as the server sent it (bytes that are not UTF-8 read as U+FFFD, as in any
// JSON decoder); each value is on a line of its own.
//
// # Configuration
//
//	SVC_API_KEY         the API key, sk_sandbox_… or sk_live_…           (config: api_key)
//	SVC_BASE_URL        the server, default http://127.0.0.1:8080        (config: base_url; flag --base-url)
//	SVC_WEBHOOK_SECRET  the endpoint's signing secret, whsec_…; several,
//	                    comma-separated, while a secret rotates          (config: webhook_secret)
//	SVC_ADMIN_TOKEN     the operator's token, for 'credentials new'      (config: admin_token)
//	SVC_API_VERSION     the version the key's licensee is pinned to,
//	                    default v1                                       (config: api_version; flag --api-version)
//	SVC_ENDPOINT        the default webhook endpoint, we_…               (config: endpoint; flag --endpoint)
//	SVC_CONFIG          the config file, default $XDG_CONFIG_HOME/svc/config (~/.config/svc/config)
//
// The config file holds "name = value" lines and # comments. It must be yours (or root's) and not be
// writable by other users, as ssh requires of its config; svc warns when others can read it. Secrets
// are never taken from flags: a command line is visible to every user of the machine (ps). A config
// file another user owns, or may write, is refused (exit status 2): whoever can change base_url can
// send the key to a server of theirs.
//
// # Exit codes
//
//	  0  success (listen: stopped by Ctrl-C or SIGTERM once the delivery in flight was answered)
//	  1  verification failed: a signature, a timestamp or a sequence (verify); a range page that is not
//	     authentic (events), or five in a row (listen: the wrong secret, most likely)
//	  2  usage: an unknown command or flag, a bad value, a missing credential or configuration
//	  3  the server refused the request: a 4xx problem, shown with its detail and located violations;
//	     or svc did not send it, the server's answer saying it would be refused (version-pin rollback)
//	  4  the server or the network failed: a 5xx, a timeout, a refused connection; retrying may help
//	  5  listen: going on would skip events silently: the events after the cursor were pruned (410),
//	     or the cursor is ahead of the stream's newest event (another server's, or planted)
//	130  interrupted a second time: stopped at once, the delivery in flight is forwarded again next time
package main
