package config

import (
	"testing"
)

// An IPv6 zone is compared as written: fe80::1%2 and fe80::1%eth0 are two
// keys even where interface 2 is eth0. Which interface an index or a name
// is belongs to the machine and can change while the node runs (renamed,
// re-created, hot-plugged interfaces); the dialer resolves the zone at
// each dial, and the node compares entries at load, when its config may
// be checked on another machine. So the key depends on the text alone,
// and a config listing both spellings loads on any machine.
func TestZonesAreComparedAsWritten(t *testing.T) {
	for _, pair := range [][2]string{
		{"[fe80::1%2]:7000", "[fe80::1%eth0]:7000"},
		{"[fe80::1%2]:7000", "[fe80::1%02]:7000"},
		{"[fe80::1%eth0]:7000", "[fe80::1%ETH0]:7000"},
		{"[fe80::1%eth0]:7000", "[fe80::1]:7000"},
	} {
		if a, b := EdgeAddressKey(pair[0]), EdgeAddressKey(pair[1]); a == b {
			t.Errorf("EdgeAddressKey(%q) = EdgeAddressKey(%q) = %q, want the zones kept as written", pair[0], pair[1], a)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"[FE80::1%2]:07000", "[fe80::1%2]:7000"},
		{"[fe80::1%lo]:7000", "[fe80::1%lo]:7000"},
		{"[fe80::1%no-such-interface]:7000", "[fe80::1%no-such-interface]:7000"},
	} {
		if got := EdgeAddressKey(tc.in); got != tc.want {
			t.Errorf("EdgeAddressKey(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	n := &Node{Node: NodeIdentity{ID: "a", Token: "t"}, Edge: NodeEdge{Addresses: []string{
		"[fe80::1%2]:7000", "[fe80::1%eth0]:7000", "[fe80::1%no-such-interface]:7000",
	}}}
	if err := n.Normalize(); err != nil {
		t.Fatalf("err = %v; want the zones, known to this machine or not, accepted as written", err)
	}
}
