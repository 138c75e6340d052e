package nodeagent

import "testing"

// An IP literal is dialled as given, with or without a zone; anything
// else is a name to follow.
func TestEdgeNameOrAddressLiteral(t *testing.T) {
	for host, name := range map[string]bool{
		"127.0.0.1":       false,
		"::1":             false,
		"fe80::1%eth0":    false,
		"::ffff:10.0.0.1": false,
		"edge":            true,
		"edge.example":    true,
		"localhost":       true,
		"10.0.0.1.":       true,
	} {
		if got := isEdgeName(host); got != name {
			t.Errorf("isEdgeName(%q) = %v, want %v", host, got, name)
		}
	}
}
