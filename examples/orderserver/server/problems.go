package server

import (
	"strings"

	"github.com/svcplatform/conventions/apierror"
)

// ProblemsPath is where the server serves the documentation of its problem codes, unversioned and
// public: every problem's type URI is <BaseURL>/problems/<code>, and GET on it answers the code's page
// (HTML to a browser, JSON otherwise); GET /problems/ lists every code.
const ProblemsPath = "/problems/"

// problemTypeBase is the type base of the server's problems: its own documentation when it knows its
// address, and apierror's default otherwise (whose path is the same, ProblemsPath).
func problemTypeBase(baseURL string) string {
	if baseURL == "" {
		return apierror.DefaultTypeBase
	}
	return strings.TrimSuffix(baseURL, "/") + ProblemsPath
}

// newProblemDocs is the documentation of every code the server writes: the library's and its own.
// TestServerProblemCodesDocumented keeps it complete.
func newProblemDocs() (*apierror.ProblemDocs, error) {
	return apierror.NewProblemDocs(append(apierror.LibraryProblemDocs(), serverProblemDocs...)...)
}

// serverProblemDocs documents the server's own codes: orders, and the bounds on the events an order
// or a sandbox trigger publishes.
var serverProblemDocs = []apierror.ProblemDoc{
	{
		Code: CodeInvalidLength, Statuses: []int{400}, Title: "Value has the wrong length",
		Description: "A string member is shorter or longer than the API allows: an order's account is 1 to 64 " +
			"characters. The violation's pointer names the member.",
		Fix: "Send a value of an allowed length, as the API reference gives for the member.",
	},
	{
		Code: CodeInvalidFormat, Statuses: []int{400}, Title: "Value has the wrong format",
		Description: "A string member does not have the shape the API requires: an order's account is letters, " +
			"digits, '_' and '-'. The violation's pointer names the member.",
		Fix: "Send a value in the member's documented format.",
	},
	{
		Code: CodeInvalidEnum, Statuses: []int{400}, Title: "Value is not one of the allowed",
		Description: "A member takes one of a fixed set of values, and the request sent another: an order's " +
			"direction (side before v2) is buy or sell. The detail lists the allowed values.",
		Fix: "Send one of the values the detail lists, spelt exactly.",
	},
	{
		Code: CodeOrderNotFound, Statuses: []int{404}, Title: "Order not found",
		Description: "No order of your licensee in this environment has the ID in the path. Another licensee's " +
			"order, and an order of your other environment, get this same answer; a sandbox reset deletes the " +
			"evaluation's orders.",
		Fix: "Take the ID (ord_…) from the answer that created the order, with a key of the same environment.",
	},
	{
		Code: CodeNotSubscribed, Statuses: []int{400}, Title: "Endpoint not subscribed to the event type",
		Description: "The sandbox trigger named a webhook endpoint whose enabled_events does not include the " +
			"event's type, so it would never receive it. The violation is located at /type.",
		Fix: "Trigger a type the endpoint is subscribed to, or add the type to its enabled_events (PATCH " +
			"/webhook_endpoints/{id}) first.",
	},
	{
		Code: CodeEventTooLarge, Statuses: []int{413}, Title: "Event too large",
		Description: "The webhook event the request would publish is larger than the server publishes (256 KiB " +
			"of envelope by default): the order, or the trigger's data, makes the event. Nothing was done, and " +
			"the Idempotency-Key is not kept.",
		Fix: "Send a smaller order or trigger data. The same request never succeeds; a smaller one may reuse the key.",
	},
	{
		Code: CodeEventsQuotaExceeded, Statuses: []int{429}, Title: "Webhook endpoint keeps too many events",
		Description: "A webhook endpoint the event would go to already keeps as many events as the server " +
			"allows (10,000 by default): room frees as the oldest pass the retention. Nothing was done; the " +
			"Idempotency-Key is not kept.",
		Fix: "Retry after the number of seconds in Retry-After with the same Idempotency-Key, or delete the " +
			"endpoints you no longer use.",
	},
}
