package sandbox

import (
	"strconv"
	"sync"
	"time"

	"github.com/svcplatform/conventions/apierror"
)

// MaxFaultDelay bounds Faults.DelayMS: long enough to push a delivery past the next one, short enough
// that a sandbox user cannot park deliveries (and connections) for hours.
const MaxFaultDelay = 30 * time.Second

// Faults are the webhook faults a sandbox user injects on one endpoint, to prove that their consumer
// recovers. Each rate is the probability, in [0, 1], that a delivery suffers the fault; the faults are
// drawn independently, except that a dropped delivery suffers nothing else. The zero value injects
// nothing.
//
// Wire form (PUT …/webhook_endpoints/{id}/faults):
//
//	{"drop":0.2,"duplicate":0.1,"reorder":0.1,"bad_signature":0.05,"delay":0.1,"delay_ms":2000}
type Faults struct {
	// Drop answers the producer 200 without sending: a silent loss the consumer must notice from the
	// next sequence number and recover through range retrieval.
	Drop float64 `json:"drop"`
	// Duplicate sends the delivery twice.
	Duplicate float64 `json:"duplicate"`
	// Reorder holds the delivery back and sends it after the endpoint's next one (or when the hold
	// time ends, so nothing is held forever).
	Reorder float64 `json:"reorder"`
	// BadSignature corrupts every v1 of X-SVC-Signature, which the consumer must reject.
	BadSignature float64 `json:"bad_signature"`
	// Delay holds the delivery for DelayMS milliseconds before sending it.
	Delay float64 `json:"delay"`
	// DelayMS is how long a delayed delivery waits: 1 to MaxFaultDelay in milliseconds when Delay is
	// set, 0 otherwise.
	DelayMS int64 `json:"delay_ms"`
}

// IsZero reports whether f injects nothing.
func (f Faults) IsZero() bool { return f == Faults{} }

// Validate returns nil, or a 400 *apierror.Error whose violations locate every bad member by its JSON
// Pointer (/drop, /delay_ms, …).
func (f Faults) Validate() error {
	var c apierror.Collector
	rates := []struct {
		ptr string
		v   float64
	}{{"/drop", f.Drop}, {"/duplicate", f.Duplicate}, {"/reorder", f.Reorder}, {"/bad_signature", f.BadSignature}, {"/delay", f.Delay}}
	for _, r := range rates {
		// Written so that NaN fails too.
		c.Check(r.v >= 0 && r.v <= 1, apierror.Body(r.ptr, "out_of_range", "must be a rate between 0 and 1"))
	}
	maxMS := MaxFaultDelay.Milliseconds()
	switch {
	case f.DelayMS < 0 || f.DelayMS > maxMS:
		c.Add(apierror.Body("/delay_ms", "out_of_range", "must be between 0 and "+strconv.FormatInt(maxMS, 10)))
	case f.Delay > 0 && f.DelayMS == 0:
		c.Add(apierror.Body("/delay_ms", "field_missing", "is required when delay is above 0: how many milliseconds to delay"))
	case f.Delay == 0 && f.DelayMS > 0:
		c.Add(apierror.Body("/delay", "field_missing", "is required when delay_ms is set: the rate (0 to 1) of deliveries to delay"))
	}
	return c.Err()
}

// FaultSource tells a FaultTransport which faults apply to an endpoint. Implementations must be safe
// for concurrent use.
type FaultSource interface {
	// FaultsFor returns the endpoint's faults; the zero Faults when it has none.
	FaultsFor(endpointID string) Faults
}

// FaultTable is the in-memory FaultSource a Controls SetFaults hook writes and a FaultTransport reads.
// The zero value is empty and ready to use. It is safe for concurrent use and must not be copied after
// first use.
type FaultTable struct {
	mu sync.RWMutex
	m  map[string]Faults
}

var _ FaultSource = (*FaultTable)(nil)

// Set validates f and stores it for the endpoint; the zero Faults removes the entry.
func (t *FaultTable) Set(endpointID string, f Faults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if f.IsZero() {
		delete(t.m, endpointID)
		return nil
	}
	if t.m == nil {
		t.m = make(map[string]Faults)
	}
	t.m[endpointID] = f
	return nil
}

// FaultsFor implements FaultSource.
func (t *FaultTable) FaultsFor(endpointID string) Faults {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.m[endpointID]
}

// Clear removes the faults of the given endpoints (an evaluation's, on reset).
func (t *FaultTable) Clear(endpointIDs ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range endpointIDs {
		delete(t.m, id)
	}
}
