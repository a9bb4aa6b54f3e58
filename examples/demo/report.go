package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// report is what a run of the demo established.
type report struct {
	OrdersRequested  int
	OrdersCreated    int64 // orders the server created
	DistinctOrderIDs int   // distinct order IDs the clients were answered with
	Inconsistent     int   // logical orders answered with two different IDs
	RequestErrors    int
	FirstError       error

	ResponsesLost   int64 // responses the lossy link swallowed, each retried with its key
	Repeats         int   // orders deliberately sent again after their answer
	ConcurrentPairs int   // orders sent twice at the same instant
	ReplaysServed   uint64
	Conflicts       uint64 // 409s: a duplicate arrived while its first was still running

	EventsEmitted       int64
	EventsProcessed     int64
	Recovered           int64 // processed after a range fetch filled a gap
	DuplicateDeliveries int64 // deliveries of events already processed, acknowledged and ignored
	// RejectedDeliveries counts deliveries refused (bad signatures), then retried by the producer. It
	// can exceed Faults["bad_signature"]: the duplicate fault copies a corrupted delivery as it is, so
	// one injection can be rejected twice.
	RejectedDeliveries int64
	Faults             map[string]int64
	ProcessedTwice     int64
	MissingOrders      int // created orders whose event was never processed

	Elapsed  time.Duration
	TimedOut bool

	// Versions is what clients pinned to v1 and v2 saw of one order.
	Versions []versionSeen

	// Roll is the secret roll halfway through the run.
	Roll rollResult

	// Health is what became of the second evaluation's misbehaving endpoints. Its events are not
	// among EventsEmitted, which counts the orders' events.
	Health healthResult

	// Metrics is what the OpenTelemetry metrics of the server and the consumer say: the same counts
	// from the other side, which must agree with the ones above.
	Metrics figures
}

// versionsOK reports whether each version showed its own shape, and only v1 its retirement.
func (r report) versionsOK() bool {
	if len(r.Versions) != 2 {
		return false
	}
	v1, v2 := r.Versions[0], r.Versions[1]
	return v1.Err == nil && v2.Err == nil && v1.Direction == "side" && v2.Direction == "direction" &&
		v1.Deprecation != "" && v1.Sunset != "" && strings.Contains(v1.Successor, "</v2/orders/") &&
		v2.Deprecation == "" && v2.Successor == ""
}

// Lost counts events emitted but never processed, and orders whose event never arrived.
func (r report) Lost() int64 {
	return max(r.EventsEmitted-r.EventsProcessed, 0) + int64(r.MissingOrders)
}

// DoneTwice counts orders created more than once and events processed more than once.
func (r report) DoneTwice() int64 {
	return max(r.OrdersCreated-int64(r.OrdersRequested), 0) + int64(r.Inconsistent) +
		int64(max(r.DistinctOrderIDs-r.OrdersRequested, 0)) + r.ProcessedTwice +
		max(r.EventsProcessed-r.EventsEmitted, 0)
}

// OK reports whether every order was created exactly once and every event processed exactly once.
func (r report) OK() bool {
	return !r.TimedOut && r.RequestErrors == 0 && r.OrdersCreated == int64(r.OrdersRequested) &&
		r.DistinctOrderIDs == r.OrdersRequested && r.Lost() == 0 && r.DoneTwice() == 0 && r.versionsOK() &&
		r.Roll.Verified && r.Health.OK() && len(r.disagreements()) == 0
}

func (r report) print(w io.Writer) {
	faults := make([]string, 0, len(r.Faults))
	for _, k := range slices.Sorted(mapsKeys(r.Faults)) {
		faults = append(faults, fmt.Sprintf("%s %d", k, r.Faults[k]))
	}
	fmt.Fprintf(w, "\nreport\n")
	fmt.Fprintf(w, "  orders requested      %d\n", r.OrdersRequested)
	fmt.Fprintf(w, "  orders created        %d (distinct ids answered %d, no duplicates: %v)\n",
		r.OrdersCreated, r.DistinctOrderIDs, r.OrdersCreated == int64(r.OrdersRequested) && r.Inconsistent == 0)
	fmt.Fprintf(w, "  retried requests      %d after lost responses, %d repeated on purpose, %d sent twice at once\n",
		r.ResponsesLost, r.Repeats, r.ConcurrentPairs)
	fmt.Fprintf(w, "  replays served        %d (and %d answered 409 while their first was running)\n", r.ReplaysServed, r.Conflicts)
	fmt.Fprintf(w, "  faults injected       %s\n", strings.Join(faults, ", "))
	fmt.Fprintf(w, "  events emitted        %d\n", r.EventsEmitted)
	fmt.Fprintf(w, "  events processed      %d (recovered by range fetch %d; duplicate deliveries ignored %d)\n",
		r.EventsProcessed, r.Recovered, r.DuplicateDeliveries)
	fmt.Fprintf(w, "  deliveries rejected   %d (bad signatures; a corrupted delivery that is also duplicated is rejected twice)\n",
		r.RejectedDeliveries)
	switch {
	case r.Roll.Err != nil:
		fmt.Fprintf(w, "  secret roll           failed: %v\n", r.Roll.Err)
	case r.Roll.Verified:
		fmt.Fprintf(w, "  secret roll           halfway, with an hour's overlap: the consumer kept its secret and lost nothing; the stream verifies with the old secret and with the new\n")
	default:
		fmt.Fprintf(w, "  secret roll           the stream did not verify with both secrets after the roll\n")
	}
	h := r.Health
	switch {
	case h.Err != nil:
		fmt.Fprintf(w, "  delivery health       failed: %v\n", h.Err)
	default:
		fmt.Fprintf(w, "  410 Gone              after %d request(s) the endpoint is %s (%s); its licensee was told: %v\n",
			h.GoneRequests, h.GoneStatus, h.GoneReason, h.Notices)
		fmt.Fprintf(w, "  429 Retry-After       %d of %d events paused, the shortest wait %.1fs (asked %.0fs); %d of %d processed, none lost\n",
			h.BusyPauses, busyEvents, h.ShortestPause.Seconds(), busyPause.Seconds(), h.BusyProcessed, busyEvents)
	}
	fmt.Fprintf(w, "  lost                  %d\n", r.Lost())
	fmt.Fprintf(w, "  done twice            %d\n", r.DoneTwice())
	for _, v := range r.Versions {
		if v.Err != nil {
			fmt.Fprintf(w, "  version %-13s failed: %v\n", v.Version, v.Err)
			continue
		}
		retirement := "current"
		if v.Deprecation != "" {
			retirement = fmt.Sprintf("Deprecation %s, Sunset %s, %s", v.Deprecation, v.Sunset, v.Successor)
		}
		fmt.Fprintf(w, "  version %-13s an order's direction is %q; %s\n", v.Version, v.Direction, retirement)
	}
	r.printMetrics(w)
	if r.RequestErrors > 0 {
		fmt.Fprintf(w, "  failed requests       %d (first: %v)\n", r.RequestErrors, r.FirstError)
	}
	if r.TimedOut {
		fmt.Fprintf(w, "  timed out before every event was processed\n")
	}
	verdict := "OK"
	if !r.OK() {
		verdict = "FAILED"
	}
	fmt.Fprintf(w, "  result                %s in %.1fs\n", verdict, r.Elapsed.Seconds())
}

func mapsKeys(m map[string]int64) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
