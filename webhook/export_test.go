package webhook

// RaceEnabled lets the external tests skip allocation counts under the race detector.
const RaceEnabled = raceEnabled
