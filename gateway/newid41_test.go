package gateway

import (
	"regexp"
	"testing"
)

// newID is its prefix and 96 random bits as 24 lowercase hex digits, and
// two ids differ.
func TestNewIDShape41(t *testing.T) {
	shape := regexp.MustCompile(`^run_[0-9a-f]{24}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := newID("run_")
		if !shape.MatchString(id) {
			t.Fatalf("id %q, want run_ and 24 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("id %q made twice", id)
		}
		seen[id] = true
	}
}
