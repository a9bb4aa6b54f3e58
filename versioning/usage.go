package versioning

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Usage is one request on a registered version, as Options.OnRequest receives it: a plain value. The
// router never reports the zero Usage (every request it reports has a Time and a Version).
type Usage struct {
	// Time is the router's clock when it decided.
	Time time.Time
	// Licensee is the request's licensee, "" when the Licensee hook named none.
	Licensee string
	// Version is the version the request was addressed to.
	Version string
	// Pinned is the licensee's pin, "" when there is none (no licensee, or refused before the pin
	// was read).
	Pinned string
	// Deprecated reports whether Version was deprecated at Time.
	Deprecated bool
	// Override reports a request served on another version than the pin (AllowOverride).
	Override bool
	// Refused is the problem code when the request was refused (version_sunset,
	// version_not_enabled, version_pin_unavailable, …), "" when it was served.
	Refused string
}

// UsageRecord is what a UsageCounter knows about one licensee on one version: a plain value, a copy
// that later requests do not change. The zero value is a record of no request.
type UsageRecord struct {
	Licensee string
	Version  string
	// Requests counts the requests, served and refused.
	Requests uint64
	// Refused counts the refused ones.
	Refused uint64
	// Deprecated counts requests made while the version was deprecated.
	Deprecated uint64
	// FirstSeen and LastSeen are the times of the first and the latest request.
	FirstSeen, LastSeen time.Time
}

// UsageCounter is a small in-memory tally of Usage by licensee and version: plug its Observe into
// Options.OnRequest and ask it who still calls a deprecated version. Requests without a licensee are
// counted under the licensee "". It holds one record per licensee and version seen, for the life of
// the process; export its Snapshot to a metrics system for anything longer.
//
// A UsageCounter is safe for concurrent use; the zero value is empty and ready to use.
type UsageCounter struct {
	mu sync.Mutex
	m  map[usageKey]*UsageRecord
}

type usageKey struct{ licensee, version string }

// Observe records one request. Its signature fits Options.OnRequest.
func (c *UsageCounter) Observe(u Usage) {
	k := usageKey{u.Licensee, u.Version}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[usageKey]*UsageRecord)
	}
	r, ok := c.m[k]
	if !ok {
		r = &UsageRecord{Licensee: u.Licensee, Version: u.Version, FirstSeen: u.Time}
		c.m[k] = r
	}
	r.Requests++
	if u.Refused != "" {
		r.Refused++
	}
	if u.Deprecated {
		r.Deprecated++
	}
	if u.Time.After(r.LastSeen) {
		r.LastSeen = u.Time
	}
	if u.Time.Before(r.FirstSeen) {
		r.FirstSeen = u.Time
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
