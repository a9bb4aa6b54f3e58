package apierror

// LibraryProblemDocs returns the documentation of every code the library's packages write — apierror,
// apikey, idempotency, ratelimit, versioning, webhook (the receiver), webhook/producer, sandbox and
// the URL codes of ssrf — in a new slice on every call, for a service to append its own entries to
// before NewProblemDocs. The packages that write the codes import apierror, so their documentation
// lives here as data; TestLibraryProblemDocsComplete, in the root module's package, reads their source
// and fails when a code has no entry here or an entry names a code nothing writes any more.
//
// The texts speak to the client that got the problem: for the webhook receiver's codes that is the
// producer that delivered the event.
func LibraryProblemDocs() []ProblemDoc {
	return []ProblemDoc{
		// Package apierror: request bodies, query strings, routing and the generic answers.
		{
			Code: CodeValidationFailed, Statuses: []int{400}, Title: "Several inputs are invalid",
			Description: "The request failed more than one check. Instead of stopping at the first, the server lists " +
				"every failing input in the problem's errors array: each entry has a location (body, query, header or " +
				"path), a pointer or a name, a code of its own and a detail. The top-level detail describes the first.",
			Fix: "Correct every input that errors lists — each entry's code has a page of its own — and send the " +
				"request again. Nothing was carried out.",
		},
		{
			Code: CodeFieldMissing, Statuses: []int{400}, Title: "Required member missing",
			Description: "A member the endpoint requires is absent from the JSON body. The violation's pointer, an " +
				"RFC 6901 JSON Pointer such as /account, names it. Some members are required only together with " +
				"another one; the detail then says which.",
			Fix: "Add the member at the pointer, with a value of the type the API reference gives, and send the " +
				"request again.",
		},
		{
			Code: CodeHeaderMissing, Statuses: []int{400}, Title: "Required header missing",
			Description: "The request lacks a header the endpoint requires, such as X-SVC-Signature or " +
				"X-SVC-Sequence on a webhook delivery. The violation's name is the header.",
			Fix: "Send the header the violation names, with a value in its documented format.",
		},
		{
			Code: CodeQueryMissing, Statuses: []int{400}, Title: "Required query parameter missing",
			Description: "A query parameter the endpoint requires is absent or empty, such as from on a range " +
				"request of webhook events. The violation's name is the parameter.",
			Fix: "Add the parameter the violation names to the query string.",
		},
		{
			Code: CodeMalformedJSON, Statuses: []int{400}, Title: "Body is not valid JSON",
			Description: "The body could not be parsed as JSON: a syntax error such as a missing quote, a trailing " +
				"comma or a raw control character in a string. The detail and the extension member offset give " +
				"the byte offset at which parsing stopped.",
			Fix: "Build the body with a JSON encoder rather than by concatenating strings, and look at the bytes " +
				"around the offset given.",
		},
		{
			Code: CodeBodyMissing, Statuses: []int{400}, Title: "Request body missing",
			Description: "The endpoint takes a JSON body, and the request had none, or only white space. A webhook " +
				"delivery with an empty body is refused the same way.",
			Fix: "Send the JSON body with Content-Type: application/json. A client that retries must send the body " +
				"again: a body stream read by the first attempt is empty the second time.",
		},
		{
			Code: CodeTrailingData, Statuses: []int{400}, Title: "Data after the JSON value",
			Description: "The body holds one complete JSON value followed by something other than white space: a " +
				"second value, or stray characters. The server reads exactly one value and refuses the rest " +
				"rather than ignore it.",
			Fix: "Send exactly one JSON value per request; where an endpoint takes several items, it takes them " +
				"in one array.",
		},
		{
			Code: CodeWrongType, Statuses: []int{400}, Title: "Member has the wrong JSON type",
			Description: "A member's JSON type is not the one the endpoint takes — a string where a number is " +
				"expected, an object where an array is — or a number is out of its field's range. The pointer " +
				"names the member, and the detail the type wanted and the type sent.",
			Fix: `Send the member with the type in the detail: 10, not "10"; true, not "true".`,
		},
		{
			Code: CodeUnknownField, Statuses: []int{400}, Title: "Unknown member in the body",
			Description: "The body has a member the endpoint does not accept. Names match exactly, so one that " +
				`differs from a known member only in case ("Account" for "account") is unknown too. The server ` +
				"refuses it rather than ignore it, so that a misspelt optional member cannot pass unnoticed.",
			Fix: "Remove the member at the pointer, or correct its spelling and case to the API reference's.",
		},
		{
			Code: CodeBodyTooLarge, Statuses: []int{413}, Title: "Request body too large",
			Description: "The body is larger than the endpoint accepts; the detail gives the limit in bytes (1 MiB " +
				"unless the endpoint documents another). The server stopped reading at the limit and carried " +
				"nothing out.",
			Fix: "Send a smaller body, for example by splitting the work over several requests. The same body " +
				"will be refused again.",
		},
		{
			Code: CodeRateLimited, Statuses: []int{429}, Title: "Too many requests",
			Description: "The caller sent more requests than its rate limit allows (for API keys, the limit of the " +
				"licensee). The request was not carried out.",
			Fix: "Wait the number of seconds in the Retry-After header before retrying, and spread requests out " +
				"with backoff and jitter. Retrying sooner is refused again.",
		},
		{
			Code: CodeInternal, Statuses: []int{500}, Title: "Internal server error",
			Description: "The server failed to handle the request because of a fault of its own. The problem " +
				"deliberately says no more than its request_id: the cause is in the server's logs under that ID.",
			Fix: "Retry later if the request is safe to repeat: a GET, or a POST with the same Idempotency-Key. " +
				"If it persists, report the request_id to the API's operators.",
		},
		{
			Code: CodeUnavailable, Statuses: []int{503}, Title: "Service temporarily unavailable",
			Description: "A store the server needs for this request, such as its record of idempotency keys, did " +
				"not answer, and the request was not carried out.",
			Fix: "Retry after the number of seconds in the Retry-After header; with the same Idempotency-Key, the " +
				"request is still carried out at most once.",
		},
		{
			Code: CodeQueryMalformed, Statuses: []int{400}, Title: "Query string cannot be parsed",
			Description: "A query parameter could not be decoded: an invalid percent-escape such as %zz, a name or " +
				"value that is not UTF-8 once decoded, or ';' used as a separator. The server refuses it rather " +
				"than drop the parameter and serve the request without it. The violation names the parameter as " +
				"far as it could be read.",
			Fix: "Percent-encode names and values as UTF-8, separate parameters with '&', and write a ';' inside a " +
				"value as %3B. A URL library's query builder does all three.",
		},
		{
			Code: CodeUnsupportedMediaType, Statuses: []int{415}, Title: "Body not sent as JSON",
			Description: "The request has a body but does not declare it as JSON: Content-Type is missing, names " +
				"another media type (text/plain, a form), has a parameter other than charset=utf-8, or is sent " +
				"twice. The server never guesses a body's type; Accept-Post or Accept-Patch names the one it takes.",
			Fix: "Send one Content-Type: application/json header, with the body encoded as UTF-8 JSON.",
		},
		{
			Code: CodeDuplicateMember, Statuses: []int{400}, Title: "Member given twice",
			Description: `An object in the body names the same member twice, as in {"side":"buy","side":"sell"}. ` +
				"Many parsers silently keep the last value, so the server refuses the request rather than guess " +
				"which one was meant. The pointer names the repeated member.",
			Fix: "Send each member once; look for code that merges objects or builds JSON by hand.",
		},
		{
			Code: CodeInvalidUTF8, Statuses: []int{400}, Title: "Text is not valid UTF-8",
			Description: "A string in the request is not valid UTF-8: it holds bytes that are not UTF-8 or an " +
				`escaped lone surrogate such as \ud800, or — in a webhook endpoint's description or metadata — a ` +
				"NUL character. The server refuses it instead of replacing the bad bytes. The pointer names the string.",
			Fix: "Encode text as UTF-8 before serializing it, with a JSON encoder, which writes characters " +
				"outside the Basic Multilingual Plane as surrogate pairs.",
		},
		{
			Code: codeInvalidValue, Statuses: []int{400}, Title: "Value refused by its type",
			Description: "A member has the right JSON type but a value the endpoint's type for it refuses, such as " +
				"a timestamp that is not RFC 3339 or an identifier of the wrong shape. The detail is the type's " +
				"own message; the pointer names the member.",
			Fix: "Send the value in the format the API reference gives for the member.",
		},
		{
			Code: CodeRouteNotFound, Statuses: []int{404}, Title: "No such route",
			Description: "No endpoint of the API matches the request's method and path: the path may be misspelt, " +
				"lack its version segment, or name a collection that does not exist. The problem does not repeat " +
				"the path.",
			Fix: "Check the path against the API reference, including the version segment (/v1/…).",
		},
		{
			Code: CodeMethodNotAllowed, Statuses: []int{405}, Title: "Method not allowed",
			Description: "The path exists, but not for the request's method, as with DELETE on a collection that " +
				"takes only GET and POST. The Allow header and the detail list the methods the path takes.",
			Fix: "Use one of the methods in the Allow header.",
		},
		{
			Code: "body_unreadable", Statuses: []int{400}, Title: "Request body could not be read",
			Description: "The server began reading the body but could not finish: the connection was closed or " +
				"reset mid-body, fewer bytes arrived than Content-Length announced, or the chunked encoding was " +
				"broken. Nothing was carried out.",
			Fix: "Send the request again with its whole body. If it recurs, look for a proxy between client and " +
				"API that cuts request bodies short or times them out.",
		},
		{
			Code: CodeProblemTypeNotFound, Statuses: []int{404}, Title: "No documentation for this problem type",
			Description: "The documentation of problem types has no page at this address: the code in the path is " +
				"not one this API documents. The problem does not repeat the path.",
			Fix: "Open the type URI of a problem response exactly as it was sent, or the index of problem types, " +
				"which lists every documented code.",
		},

		// Package apikey: Bearer authentication.
		{
			Code: "api_key_missing", Statuses: []int{401}, Title: "API key missing",
			Description: "The request has no Authorization header, or an empty one, so the server cannot tell who " +
				"is calling.",
			Fix: "Send Authorization: Bearer <API key>, with a key of the environment you call: sk_sandbox_… " +
				"for the sandbox, sk_live_… for production.",
		},
		{
			Code: "api_key_malformed", Statuses: []int{401}, Title: "Authorization header malformed",
			Description: `The Authorization header is not one "Bearer <API key>": it was sent more than once, ` +
				"has nothing after Bearer or a space inside the key, or the key is not shaped like one of this " +
				"platform's (its prefix or checksum is wrong, as with a truncated or mistyped key). The problem " +
				"never repeats the key.",
			Fix: "Send exactly one header Authorization: Bearer <API key>, with the key copied whole from where it " +
				"was issued.",
		},
		{
			Code: "auth_scheme_unsupported", Statuses: []int{401}, Title: "Authentication scheme not supported",
			Description: "The Authorization header uses another scheme than Bearer: Basic, Token, or a bare key " +
				"without a scheme.",
			Fix: "Send the API key as Authorization: Bearer <API key>.",
		},
		{
			Code: "api_key_invalid", Statuses: []int{401}, Title: "API key not valid",
			Description: "The key is well-formed but authenticates no one: it is unknown, expired or revoked. The " +
				"server does not say which, so that the answer tells someone guessing keys nothing.",
			Fix: "Check that the key belongs to the environment you call and has not been rolled, expired or " +
				"revoked; issue a new one if it has. Retrying with the same key is refused again.",
		},
		{
			Code: "authentication_unavailable", Statuses: []int{503}, Title: "Authentication temporarily unavailable",
			Description: "The server could not check the credentials just now, because its credential store did " +
				"not answer. The key may well be valid; the request was not carried out.",
			Fix: "Retry after the number of seconds in Retry-After, with the same key (and, for a mutating request, " +
				"the same Idempotency-Key).",
		},

		// Package apikey: restricted keys and the keys API.
		{
			Code: "permission_denied", Statuses: []int{403}, Title: "API key lacks the permission",
			Description: "The key is valid but restricted, and the route requires a permission it does not hold. The " +
				"detail and the member required_permission name the permission (<resource>:read or " +
				"<resource>:write; write includes read). On the keys API, a restricted key is also refused when it " +
				"asks to create, roll or revoke a key with permissions it lacks itself: a key hands out only what " +
				"it holds.",
			Fix: "Call with a key that has the permission named — the full key, or a restricted key created with " +
				"it (POST /api_keys with that permission, by a key that holds it). Retrying with the same key is " +
				"refused again.",
		},
		{
			Code: "invalid_permission", Statuses: []int{400}, Title: "Permission not known",
			Description: "A permission in the request is not one this API declares, or the list is empty or longer " +
				"than 64. The violation's pointer names the entry (/permissions/1).",
			Fix: "List one or more of the API's permissions, each <resource>:read or <resource>:write, or omit " +
				"permissions for a key with the permissions of the key you call with.",
		},
		{
			Code: "api_key_not_found", Statuses: []int{404}, Title: "API key not found",
			Description: "No key of your licensee in this environment has the ID in the path. A key of another " +
				"licensee, or of your other environment, gets this same answer.",
			Fix: "Take the ID (key_…) from GET /api_keys, with a key of the same environment.",
		},
		{
			Code: "api_key_limit_reached", Statuses: []int{422}, Title: "Too many API keys",
			Description: "Your licensee already holds the most API keys allowed in this environment (100 by " +
				"default). Keys rolled and still working count until they end. Nothing was created.",
			Fix: "Revoke a key you no longer use (DELETE /api_keys/{id}) and create the new one. Rolling a key is " +
				"never refused for this limit.",
		},
		{
			Code: "api_key_ending", Statuses: []int{422}, Title: "API key already set to end",
			Description: "The key to roll was rolled or revoked already and has an end; rolling it again would " +
				"mint keys without bound. Nothing was created.",
			Fix: "Roll the key that replaced it, or revoke this one (DELETE /api_keys/{id}) to end it now.",
		},

		// Package idempotency: the Idempotency-Key middleware.
		{
			Code: "idempotency_key_missing", Statuses: []int{400}, Title: "Idempotency-Key header missing",
			Description: "A mutating request was sent without an Idempotency-Key header; the detail names the " +
				"methods that need one. The key is what lets a client retry after a timeout without the request " +
				"being carried out twice.",
			Fix: "Send a fresh random key (a UUID, say) as Idempotency-Key for each new operation, and the same " +
				"key again when retrying that operation.",
		},
		{
			Code: "idempotency_key_invalid", Statuses: []int{400}, Title: "Idempotency-Key header invalid",
			Description: "The Idempotency-Key header is empty, longer than 255 bytes, holds a character outside " +
				"visible ASCII (0x21 to 0x7E: no spaces, no accented letters), or was sent more than once.",
			Fix: "Send one Idempotency-Key of 1 to 255 visible ASCII characters, such as a UUID.",
		},
		{
			Code: "idempotency_key_reused", Statuses: []int{422}, Title: "Idempotency-Key reused for another request",
			Description: "The same credential already used this key for a different request — another method, " +
				"path, query or body. A repeated key gets the original request's response, so a request that " +
				"differs is refused: two operations sharing one key is a client bug.",
			Fix: "Use a new key for each new operation; reuse a key only to retry the identical request.",
		},
		{
			Code: "idempotency_key_in_use", Statuses: []int{409}, Title: "Request with this key still in progress",
			Description: "A request with the same Idempotency-Key from the same credential is still being " +
				"processed, as when a client retries before its first attempt has finished. This one was not " +
				"carried out.",
			Fix: "Wait the number of seconds in Retry-After and retry with the same key and the same request: once " +
				"the first attempt finishes, the retry gets its response.",
		},
		{
			Code: "credential_missing", Statuses: []int{401}, Title: "Credentials needed for an idempotent request",
			Description: "Idempotency keys are kept per credential, so that no caller can be answered with another " +
				"caller's stored response, and this request has no Authorization header to keep its key under.",
			Fix: "Authenticate the request: send Authorization: Bearer <API key>.",
		},
		{
			Code: "idempotency_response_too_large", Statuses: []int{500}, Title: "Response too large to store for replay",
			Description: "The server carried the request out in a transaction, but its response was larger than it " +
				"can store for replays of the Idempotency-Key, so it rolled the transaction back: nothing was " +
				"carried out.",
			Fix: "The limit is the server's: report the request_id to the API's operators. The same request fails " +
				"the same way until the response or the limit changes.",
		},
		{
			Code: "idempotency_quota_exceeded", Statuses: []int{429}, Title: "Too many idempotency records",
			Description: "The credential holds as many idempotency records as the server keeps for one caller. " +
				"Records make room again as they reach the end of their retention (24 hours by default). The " +
				"request was not carried out.",
			Fix: "Retry after the number of seconds in Retry-After. If it recurs, look for a client that makes a " +
				"new key for every retry, or sends keys with requests that need none.",
		},

		// Package ratelimit.
		{
			Code: "rate_limiter_unavailable", Statuses: []int{503}, Title: "Rate limiter unavailable",
			Description: "The server could not consult its rate limiter and is configured to refuse requests rather " +
				"than serve them unmetered. The request was not carried out.",
			Fix: "Retry after the number of seconds in Retry-After.",
		},

		// Package versioning: the version path segment and the version pin.
		{
			Code: "version_unknown", Statuses: []int{400, 404}, Title: "Unknown API version",
			Description: "The path's first segment names no version this API serves: it is not a version name " +
				"such as v2, that version does not exist or is not released yet, or the path has no version " +
				"segment at all (404). The version pin endpoint answers a body whose /version names such a " +
				"version the same way (400). The extension member supported_versions lists the versions served.",
			Fix: "Start the path with a version from supported_versions (/v2/…), or put one in the pin request's " +
				"version member.",
		},
		{
			Code: "version_sunset", Statuses: []int{400, 410}, Title: "API version sunset",
			Description: "The version in the path reached its sunset date and is no longer served (410); its " +
				"responses carried Deprecation and Sunset headers before that. successor_version names its " +
				"replacement and supported_versions lists the versions served. The version pin endpoint answers " +
				"a request to pin a sunset version with a 400.",
			Fix: "Move the integration to successor_version, reading the changes between the two versions, and " +
				"call that version.",
		},
		{
			Code: "version_not_enabled", Statuses: []int{403}, Title: "API version not enabled for this licensee",
			Description: "The licensee is pinned to another API version, named in pinned_version, and the path asks " +
				"for one that is not enabled for it. The pin keeps an integration on the version it was built for.",
			Fix: "Call the pinned version; to use a newer one, upgrade the pin with the version pin endpoint once " +
				"the integration is ready for it.",
		},
		{
			Code: "version_pin_unavailable", Statuses: []int{503}, Title: "Version pin unavailable",
			Description: "The server could not read the licensee's version pin from its store, so it could not tell " +
				"which version the request may use. The request was not carried out.",
			Fix: "Retry after the number of seconds in Retry-After.",
		},
		{
			Code: "version_downgrade", Statuses: []int{400}, Title: "Version pin cannot move back",
			Description: "The version pin request asked for a version older than the one the licensee is pinned " +
				"to, and not the version its last upgrade came from. A pin moves forward; only the last upgrade " +
				"can be rolled back, to the version before it, within the rollback window.",
			Fix: "Ask for the pinned version or a newer one in /version, or for previous_version while GET " +
				"version_pin shows a rollback_until.",
		},
		{
			Code: "version_upgrade_final", Statuses: []int{409}, Title: "Upgrade is final",
			Description: "The request asked to roll the last upgrade back to the version before it, and the " +
				"rollback window (72 hours after the upgrade by default) has closed: the upgrade became final at " +
				"the time the detail gives. Nothing changed.",
			Fix: "Stay on the pinned version and adapt the integration to it. A support operator can still move " +
				"the pin for you when a rollback is unavoidable.",
		},
		{
			Code: "licensee_required", Statuses: []int{401}, Title: "Version pin needs a licensee",
			Description: "A version pin belongs to a licensee, and the request to read or change it was not " +
				"authenticated as one.",
			Fix: "Authenticate the request with the licensee's API key: Authorization: Bearer <API key>.",
		},

		// Package webhook: the receiver's answers to a delivery, read by the producer.
		{
			Code: "signature_invalid", Statuses: []int{400}, Title: "Webhook signature header malformed",
			Description: "The delivery's X-SVC-Signature header is not t=<unix seconds>,v1=<64 hex digits>, with " +
				"optionally more v1= entries. The detail says what is wrong with its shape, never its value.",
			Fix: "Sign deliveries with the platform's signer and send the header it makes unchanged; check that no " +
				"proxy rewrites it.",
		},
		{
			Code: "signature_mismatch", Statuses: []int{401}, Title: "Webhook signature does not match",
			Description: "No v1 signature in X-SVC-Signature matches the body under the endpoint's signing secrets: " +
				"the body was changed after signing (re-serialized, re-encoded, altered by a proxy), or it was " +
				"signed with another secret, such as one rolled since.",
			Fix: "Sign the exact bytes sent with the endpoint's current secret. A receiver must verify the raw " +
				"body before parsing it, and take the new secret after a roll.",
		},
		{
			Code: "signature_too_old", Statuses: []int{401}, Title: "Webhook signature too old",
			Description: "The signature is authentic, but its timestamp t is older than the receiver's tolerance " +
				"(five minutes by default). Refusing old signatures keeps a captured delivery from being replayed.",
			Fix: "Sign every delivery attempt, retries included, when it is sent, and keep the sender's clock " +
				"synchronised.",
		},
		{
			Code: "signature_too_new", Statuses: []int{401}, Title: "Webhook signature from the future",
			Description: "The signature is authentic, but its timestamp t is ahead of the receiver's clock by more " +
				"than the tolerance (five minutes by default): one of the two clocks is wrong.",
			Fix: "Synchronise the clocks of sender and receiver (NTP), and sign with the current time.",
		},
		{
			Code: "sequence_invalid", Statuses: []int{400}, Title: "X-SVC-Sequence header invalid",
			Description: "The delivery's X-SVC-Sequence header is not a sequence number: a decimal integer from 1 " +
				"to 9223372036854775807, without sign or leading zeros.",
			Fix: "Send the sequence the producer gave the event, in decimal.",
		},
		{
			Code: "endpoint_mismatch", Statuses: []int{401}, Title: "Event signed for another endpoint",
			Description: "The delivery is correctly signed, but its body's endpoint member names another webhook " +
				"endpoint than the one receiving it, as when a delivery for one endpoint is replayed to another " +
				"that shares its secret.",
			Fix: "Deliver each event only to the endpoint it was signed for, and give every endpoint its own " +
				"signing secret.",
		},
		{
			Code: "delivery_not_stored", Statuses: []int{503}, Title: "Delivery not processed yet",
			Description: "The receiver could not process the event now — fetching missed events, handling the " +
				"event or storing its position in the stream failed — so it refused the delivery instead of " +
				"acknowledging it. Nothing was skipped.",
			Fix: "Deliver the event again after the number of seconds in Retry-After; the producer's retries do " +
				"this.",
		},
		{
			Code: "sequence_mismatch", Statuses: []int{400}, Title: "Sequence header and body disagree",
			Description: "The X-SVC-Sequence header and the signed body's sequence member hold different numbers, " +
				"so the receiver trusts neither.",
			Fix: "Set X-SVC-Sequence from the sequence of the body that was signed.",
		},
		{
			Code: "invalid_object", Statuses: []int{400}, Title: "Delivery body is not an event",
			Description: `The delivery's body has an object member other than "event", so it is not an event envelope.`,
			Fix:         `Deliver event envelopes only: {"object":"event","id":…,"sequence":…,"type":…}.`,
		},
		{
			Code: "invalid_sequence", Statuses: []int{400}, Title: "Event sequence out of range",
			Description: "The event's sequence member is 0 or above 9223372036854775807; sequences start at 1.",
			Fix:         "Send the sequence the producer gave the event.",
		},

		// Package webhook/producer: range retrieval, the delivery history, resend and recover, and the
		// webhook endpoints API (with the checks of its internal epcheck and of package ssrf).
		{
			Code: "request_not_found", Statuses: []int{404}, Title: "Request not found in the log",
			Description: "No request of your licensee in this environment with this ID is in the request log. " +
				"Another licensee's request gets this same answer, and the log keeps requests for 7 days by " +
				"default; a request refused before its key was known (a 401) belongs to no licensee.",
			Fix: "Take the ID from the X-Request-Id header or the problem's request_id, ask with a key of the " +
				"same licensee and environment, and within the retention.",
		},
		{
			Code: "invalid_cursor", Statuses: []int{400}, Title: "Pagination cursor invalid",
			Description: "The starting_after query parameter of the delivery history is not the id of a delivery " +
				"attempt (att_ and a number).",
			Fix: "Pass the id of the last attempt of the previous page as it was returned, or leave starting_after " +
				"out for the first page.",
		},
		{
			Code: "invalid_outcome", Statuses: []int{400}, Title: "Unknown delivery outcome",
			Description: "The outcome query parameter of the delivery history is not delivered, failed or abandoned.",
			Fix:         "Filter with outcome=delivered, failed or abandoned, or leave outcome out for every attempt.",
		},
		{
			Code: "webhook_endpoint_not_found", Statuses: []int{404}, Title: "Webhook endpoint not found",
			Description: "No webhook endpoint of yours has this ID, given in the path (or in the endpoint member of a " +
				"sandbox trigger). An endpoint of another account, or a deleted one, reads exactly the same.",
			Fix: "Use the ID returned when the endpoint was registered, in the environment of the key you call " +
				"with; listing your endpoints shows their IDs.",
		},
		{
			Code: "events_pruned", Statuses: []int{410}, Title: "Events past retention",
			Description: "The events asked for — from in a range request, or the sequences to resend or recover — " +
				"are older than the event log keeps, and are gone. The extension member first_retained is the " +
				"first sequence still kept.",
			Fix: "Ask again from first_retained. The events before it cannot be fetched or delivered again: " +
				"reconcile from the API's resources instead.",
		},
		{
			Code: "not_an_integer", Statuses: []int{400}, Title: "Query parameter is not an integer",
			Description: "A numeric query parameter (from, to, limit or sequence) is not a non-negative decimal " +
				"integer. The problem does not repeat the value.",
			Fix: "Send digits only, such as limit=100: no sign, decimal point or exponent.",
		},
		{
			Code: "out_of_range", Statuses: []int{400}, Title: "Value out of range",
			Description: "A number is outside the range its input allows: a page limit above its maximum, a " +
				"sequence of 0, a recovery that ends before it starts, a sandbox fault rate above 1, a webhook " +
				"endpoint's rate limit above its maximum. The violation locates the input, and its detail gives " +
				"the range.",
			Fix: "Send a value within the range in the violation's detail.",
		},
		{
			Code: "range_inverted", Statuses: []int{400}, Title: "Range ends before it starts",
			Description: "The to query parameter of a range request of webhook events is below from.",
			Fix:         "Send a to of at least from, or leave to out to read up to the newest event.",
		},
		{
			Code: "query_repeated", Statuses: []int{400}, Title: "Query parameter repeated",
			Description: "A query parameter that takes one value was given more than once, as in " +
				"?limit=10&limit=20; the server does not pick one.",
			Fix: "Send each parameter once.",
		},
		{
			Code: "range_requests_in_flight", Statuses: []int{429}, Title: "Too many range requests at once",
			Description: "The licensee already has as many range requests of webhook events in progress as are " +
				"served at once (four by default), a bound on what one licensee can make the server hold.",
			Fix: "Wait the number of seconds in Retry-After, and fetch ranges one after another, not in parallel.",
		},
		{
			Code: "webhook_endpoint_limit_reached", Statuses: []int{422}, Title: "Webhook endpoint limit reached",
			Description: "The licensee already has as many webhook endpoints in this environment as it may (16 by " +
				"default); the detail gives the limit. Waiting frees no slot.",
			Fix: "Delete an endpoint you no longer use, or subscribe an existing endpoint to more event types, and " +
				"register again.",
		},
		{
			Code: "unsupported_api_version", Statuses: []int{400}, Title: "API version not supported for webhooks",
			Description: "The api_version member of a webhook endpoint names a version the API does not serve, or " +
				"is not a version name. Events are sent to the endpoint in its version, so it must be one the " +
				"API renders.",
			Fix: "Set api_version to a version the detail lists, or leave it out when registering to take the API's " +
				"default for the licensee.",
		},
		{
			Code: "invalid_setting", Statuses: []int{400}, Title: "Setting out of bounds",
			Description: `A webhook endpoint setting breaks its bounds: a status other than "enabled" or ` +
				`"disabled", or the expires_in of a secret roll outside 0 to 604800 seconds (7 days). The ` +
				"pointer names the setting and the detail its bounds.",
			Fix: "Send a value within the bounds in the detail.",
		},
		{
			Code: "event_not_found", Statuses: []int{404}, Title: "Event not found",
			Description: "The resend request names a sequence that the endpoint's event stream has not reached.",
			Fix: "Resend a sequence the endpoint has had an event for; a range request of its events lists " +
				"them.",
		},
		{
			Code: "range_too_large", Statuses: []int{400}, Title: "Recovery range too large",
			Description: "The recover request names more events than one recovery pushes again (10,000 by " +
				"default); the detail gives the limit.",
			Fix: "Split the range into several recover requests, each within the limit.",
		},
		{
			Code: "webhook_endpoint_disabled", Statuses: []int{422}, Title: "Webhook endpoint disabled",
			Description: "Resend and recover push events to the endpoint, and a disabled endpoint is sent nothing, " +
				"so the request would do nothing. The detail says why the endpoint was disabled.",
			Fix: `Enable the endpoint (status "enabled") once its URL answers again, then resend or recover.`,
		},
		{
			Code: "too_long", Statuses: []int{400}, Title: "Text too long",
			Description: "A text of a webhook endpoint is longer than allowed: its description, a metadata key or " +
				"value, or its extra headers taken together. The detail gives the length and the limit, in bytes.",
			Fix: "Shorten the text to the limit. Lengths count bytes of UTF-8, in which a character outside ASCII " +
				"takes two to four.",
		},
		{
			Code: "too_many", Statuses: []int{400}, Title: "Too many entries",
			Description: "A webhook endpoint has more metadata pairs, extra headers or enabled event types than " +
				"allowed. The detail gives the count and the limit.",
			Fix: `Remove entries down to the limit; to subscribe to every event type, send ["*"].`,
		},
		{
			Code: "empty", Statuses: []int{400}, Title: "Empty value",
			Description: "A value that must not be empty is: a metadata key, an event type, or the enabled_events " +
				"list itself, which is refused rather than read as every type.",
			Fix: `Give the value; for enabled_events, list at least one event type, or "*" for every type.`,
		},
		{
			Code: "duplicate", Statuses: []int{400}, Title: "Entry given twice",
			Description: "An event type is listed twice in enabled_events, or an extra header's name repeats " +
				"another's in a different case (header names are case-insensitive).",
			Fix: "Remove the repeated entry.",
		},
		{
			Code: "invalid_header_name", Statuses: []int{400}, Title: "Invalid header name",
			Description: "An extra header of a webhook endpoint has a name that is not an HTTP token: only letters, " +
				"digits and !#$%&'*+-.^_`|~ are allowed, so no spaces, colons or characters outside ASCII.",
			Fix: "Name the header with those characters only, such as X-Tenant.",
		},
		{
			Code: "invalid_header_value", Statuses: []int{400}, Title: "Invalid header value",
			Description: "An extra header of a webhook endpoint has a value that is not visible ASCII, spaces and " +
				"tabs, or that begins or ends with white space. A line break is refused so that no value can " +
				"add a header of its own.",
			Fix: "Send a one-line ASCII value without leading or trailing spaces; encode other data first " +
				"(base64, percent-encoding).",
		},
		{
			Code: "header_not_allowed", Statuses: []int{400}, Title: "Header cannot be set",
			Description: "The extra header is one the producer sets itself or never sends on a customer's behalf: " +
				"a credential (Authorization, Cookie), a hop-by-hop header, a Content- header, Host or User-Agent, " +
				"a trace header, or any X-SVC- header, which are the producer's.",
			Fix: "Choose another name. To authenticate deliveries, verify their X-SVC-Signature rather than a " +
				"credential in a header.",
		},
		{
			Code: "wildcard_not_alone", Statuses: []int{400}, Title: "Wildcard listed with other event types",
			Description: `enabled_events lists "*", which subscribes to every event type, together with other types.`,
			Fix:         `Send ["*"] alone, or a list of specific event types.`,
		},
		{
			Code: "invalid_event_type", Statuses: []int{400}, Title: "Malformed event type",
			Description: "An event type — in a webhook endpoint's enabled_events, or the type of a sandbox " +
				"trigger — is not dot-separated lower-case words such as order.created, of visible ASCII within " +
				"the length limit.",
			Fix: "Write the event type as the API's list of event types gives it, such as order.created.",
		},
		{
			Code: "unknown_event_type", Statuses: []int{400}, Title: "Unknown event type",
			Description: "enabled_events names a well-formed event type that the API does not send.",
			Fix:         `Subscribe to types from the API's list of event types (GET /v1/event_types), or to "*".`,
		},
		{
			Code: "url_too_long", Statuses: []int{400}, Title: "Webhook URL too long",
			Description: "The webhook URL is longer than allowed (2048 bytes by default); the detail gives its " +
				"length and the limit.",
			Fix: "Register a shorter URL.",
		},
		{
			Code: "url_malformed", Statuses: []int{400}, Title: "Webhook URL cannot be parsed",
			Description: "The webhook URL is not a valid URL, because of a space, an invalid percent-escape or a " +
				"broken IPv6 literal, say.",
			Fix: "Send an absolute, percent-encoded URL such as https://hooks.example.com/svc.",
		},
		{
			Code: "url_not_absolute", Statuses: []int{400}, Title: "Webhook URL not absolute",
			Description: "The webhook URL has no scheme or no //host part, so there is nowhere to deliver to.",
			Fix:         "Send the whole URL, starting with https://.",
		},
		{
			Code: "scheme_not_allowed", Statuses: []int{400}, Title: "Webhook URL scheme not allowed",
			Description: "The webhook URL's scheme is not one the API accepts: https, and http only where the API " +
				"allows it (in the sandbox, say). The detail names the schemes accepted.",
			Fix: "Serve the receiver over HTTPS and register its https:// URL.",
		},
		{
			Code: "url_has_userinfo", Statuses: []int{400}, Title: "Webhook URL contains credentials",
			Description: "The webhook URL contains a user name or password (user:password@host). Credentials in " +
				"URLs end up in logs, and deliveries are authenticated by their signature instead.",
			Fix: "Remove the user information, and have the receiver verify X-SVC-Signature.",
		},
		{
			Code: "url_has_fragment", Statuses: []int{400}, Title: "Webhook URL has a fragment",
			Description: "The webhook URL has a fragment (#…), which is never sent over HTTP, so it would be lost " +
				"on every delivery.",
			Fix: "Remove the fragment; put what it carried in the path or the query.",
		},
		{
			Code: "host_missing", Statuses: []int{400}, Title: "Webhook URL has no host",
			Description: "The webhook URL's host is empty, as in https:///hooks.",
			Fix:         "Include the receiver's host name.",
		},
		{
			Code: "host_invalid", Statuses: []int{400}, Title: "Webhook URL host invalid",
			Description: "The webhook URL's host is neither a host name nor an IP address the API accepts: it has " +
				"characters other than letters, digits, '-' and '_', an invalid or unbracketed IPv6 address or " +
				"an IPv6 zone, or it looks like an IPv4 address without being one.",
			Fix: "Use a DNS name (an internationalised one in its xn-- form) or an IPv6 address in brackets.",
		},
		{
			Code: "host_not_canonical", Statuses: []int{400}, Title: "IPv4 address not in dotted-decimal form",
			Description: "The webhook URL writes its IPv4 address in a legacy form — one number, octal or hex, or " +
				"fewer than four parts — that different software reads differently. The detail gives the " +
				"dotted-decimal form.",
			Fix: "Write the address as the detail gives it, or use a host name.",
		},
		{
			Code: "host_blocked", Statuses: []int{400}, Title: "Webhook URL host not allowed",
			Description: "The webhook URL points where the platform does not deliver: a loopback, private, " +
				"link-local or other special-use address, a single-label name, or a name under a local-use " +
				"suffix such as .local or .internal. The same check runs again at every delivery, against the " +
				"address the name resolves to.",
			Fix: "Register a publicly reachable receiver with a fully qualified DNS name. To receive events on a " +
				"development machine, expose it through a public tunnel.",
		},
		{
			Code: "port_invalid", Statuses: []int{400}, Title: "Webhook URL port invalid",
			Description: "The webhook URL's port is empty (a colon without a number), 0, or above 65535.",
			Fix:         "Give a port from 1 to 65535, or leave it out for the scheme's default.",
		},
	}
}
