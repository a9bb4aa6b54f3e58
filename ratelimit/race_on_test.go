//go:build race

package ratelimit

// raceEnabled: allocation counts are asserted only without the race detector, which allocates on its
// own and makes sync.Pool drop items at random.
const raceEnabled = true
