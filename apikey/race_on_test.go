//go:build race

package apikey

// raceEnabled: allocation counts are asserted only without the race detector, which allocates on its
// own and makes sync.Pool drop items at random.
const raceEnabled = true
