// Package testclock is the injectable clock the library's tests and test suites share: time moves only
// when the test says so. It is safe for concurrent use.
package testclock

import (
	"sync"
	"time"
)

// Clock is a settable clock. Pass its Now method where an Options.Now is taken.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a Clock that reads t until it is advanced or set.
func New(t time.Time) *Clock { return &Clock{t: t} }

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

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}
