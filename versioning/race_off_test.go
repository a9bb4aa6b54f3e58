//go:build !race

package versioning_test

const raceEnabled = false
