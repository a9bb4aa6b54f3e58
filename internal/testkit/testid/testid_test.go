package testid

import (
	"regexp"
	"testing"
)

func TestNew(t *testing.T) {
	shape := regexp.MustCompile(`^t_[a-z2-7]{26}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := New("t_")
		if !shape.MatchString(id) {
			t.Fatalf("New(%q) = %q, want t_ and 26 lowercase base32 characters", "t_", id)
		}
		if seen[id] {
			t.Fatalf("New returned %q twice", id)
		}
		seen[id] = true
	}
}
