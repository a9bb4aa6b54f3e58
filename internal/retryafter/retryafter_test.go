package retryafter

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"120", 120 * time.Second, true},
		{"0", 0, true},
		{"-1", 0, false},
		{"", 0, false},
		{"soon", 0, false},
		{"1.5", 0, false},
		{"99999999999999999", longest, true},
		{"Sat, 28 Nov 2026 12:02:00 GMT", 2 * time.Minute, true},
		{"Sat, 28 Nov 2026 11:00:00 GMT", 0, true},
		{"Sun, 28 Nov 2027 12:00:00 GMT", longest, true},
	} {
		got, ok := Parse(c.in, now)
		if got != c.want || ok != c.ok {
			t.Errorf("Parse(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
