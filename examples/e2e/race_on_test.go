//go:build race

package e2e

// raceEnabled builds the binaries with -race too when the tests run with it: the processes are then
// checked for data races as well, and they share the race-instrumented build cache of the tests.
const raceEnabled = true
