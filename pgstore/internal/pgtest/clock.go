package pgtest

import (
	"sync"
	"time"
)

// Clock is a settable clock for the tests' Options.Now: time moves only when the test says so. It is
// the root module's internal testclock, copied because a nested module must not import the root
// module's internal/. It is safe for concurrent use; the zero value reads the zero time.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock that reads t until it is advanced.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d (backward when d is negative).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
