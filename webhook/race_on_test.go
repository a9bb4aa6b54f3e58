//go:build race

package webhook

// raceEnabled: the race detector makes sync.Pool drop items at random, so allocation counts of pooled
// paths are only asserted without it.
const raceEnabled = true
