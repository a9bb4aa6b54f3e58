//go:build !race

package apikey

const raceEnabled = false
