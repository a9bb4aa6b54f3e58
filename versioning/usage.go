package versioning

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// UsageRecord is what a UsageCounter knows about one licensee on one version: a plain value, a copy
// that later requests do not change. The zero value is a record of no request.
type UsageRecord struct {
	Licensee string
	Version  string
	// Requests counts the requests, served and refused.
	Requests uint64
	// Refused counts the refused ones.
	Refused uint64
	// Deprecated counts requests made while the version was deprecated (or sunset).
	Deprecated uint64
	// FirstSeen and LastSeen are the times of the first and the latest request.
	FirstSeen, LastSeen time.Time
}

// UsageCounter is a small in-memory tally of the Router's decisions by licensee and version: set its
// Observe as Hooks.Decided and ask it who still calls a deprecated version. It counts every request
// on a registered version, served or refused; requests on no registered version (LifecycleUnknown)
// are not counted, and requests without a licensee are counted under the licensee "". It holds one
// record per licensee and version seen, for the life of the process; export its Snapshot to a
// metrics system for anything longer.
//
// A UsageCounter is safe for concurrent use; the zero value is empty and ready to use.
type UsageCounter struct {
	mu sync.Mutex
	m  map[usageKey]*UsageRecord
}

type usageKey struct{ licensee, version string }

// Observe records one request; it ignores an Observation of no registered version. Its signature
// fits Hooks.Decided.
func (c *UsageCounter) Observe(_ context.Context, o Observation) {
	if o.Version == "" || o.Lifecycle == LifecycleUnknown {
		return
	}
	k := usageKey{o.Licensee, o.Version}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[usageKey]*UsageRecord)
	}
	r, ok := c.m[k]
	if !ok {
		r = &UsageRecord{Licensee: o.Licensee, Version: o.Version, FirstSeen: o.At}
		c.m[k] = r
	}
	r.Requests++
	if o.Outcome.refused() {
		r.Refused++
	}
	if o.Lifecycle == LifecycleDeprecated || o.Lifecycle == LifecycleSunset {
		r.Deprecated++
	}
	if o.At.After(r.LastSeen) {
		r.LastSeen = o.At
	}
	if o.At.Before(r.FirstSeen) {
		r.FirstSeen = o.At
	}
}

// Snapshot returns every record, ordered by version and then licensee.
func (c *UsageCounter) Snapshot() []UsageRecord {
	return c.filter(func(*UsageRecord) bool { return true })
}

// Users returns the records of the named version whose last request is not before since: who still
// calls it. For a deprecated version, that is the list of licensees to contact before its sunset.
func (c *UsageCounter) Users(version string, since time.Time) []UsageRecord {
	return c.filter(func(r *UsageRecord) bool { return r.Version == version && !r.LastSeen.Before(since) })
}

func (c *UsageCounter) filter(keep func(*UsageRecord) bool) []UsageRecord {
	c.mu.Lock()
	out := make([]UsageRecord, 0, len(c.m))
	for _, r := range c.m {
		if keep(r) {
			out = append(out, *r)
		}
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b UsageRecord) int {
		na, _ := parseName(a.Version)
		nb, _ := parseName(b.Version)
		return cmp.Or(cmp.Compare(na, nb), cmp.Compare(a.Licensee, b.Licensee))
	})
	return out
}
