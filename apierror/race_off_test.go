//go:build !race

package apierror_test

const raceEnabled = false
