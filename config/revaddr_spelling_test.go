package config

import (
	"net"
	"net/netip"
	"strings"
	"testing"
)

// Two spellings merge only when the dialer reads them as one socket. DNS
// folds only ASCII case (RFC 4343), and Go's resolver refuses other
// bytes: a non-ASCII letter that lower-cases to an ASCII one (the Kelvin
// sign is k) or two invalid UTF-8 bytes are another name, not this one.
// The trailing dot goes only from a name: a lone dot (the root) is not the
// empty host (the local system), edge.. is not edge., and 10.0.0.1. is a
// name to look up, not the address 10.0.0.1.
func TestEdgeAddressKeyKeepsDistinctSocketsApart(t *testing.T) {
	for _, pair := range [][2]string{
		{"\u212Aedge:7000", "kedge:7000"},
		{"\u017Fedge:7000", "sedge:7000"},
		{"\xffedge:7000", "\xfeedge:7000"},
		{".:7000", ":7000"},
		{"..:7000", ".:7000"},
		{"edge..:7000", "edge.:7000"},
		{"10.0.0.1.:7000", "10.0.0.1:7000"},
		{"[::ffff:10.0.0.1].:7000", "10.0.0.1:7000"},
		{"[fe80::1%ETH0]:7000", "[fe80::1%eth0]:7000"},
	} {
		if a, b := EdgeAddressKey(pair[0]), EdgeAddressKey(pair[1]); a == b {
			t.Errorf("EdgeAddressKey(%q) = EdgeAddressKey(%q) = %q, want two sockets", pair[0], pair[1], a)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"ÉDGE.:7000", "Édge:7000"},
		{"edge.TEST.:7000", "edge.test:7000"},
		{"[::FFFF:10.0.0.1]:+07000", "10.0.0.1:7000"},
	} {
		if got := EdgeAddressKey(tc.in); got != tc.want {
			t.Errorf("EdgeAddressKey(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzEdgeAddressKey: the key never panics, is its own key, and merges
// two host:port spellings only if their hosts are one IP address or one
// name up to ASCII case and a single trailing dot, and their ports one
// number.
func FuzzEdgeAddressKey(f *testing.F) {
	for _, s := range []string{"edge:7000", "EDGE.:07000", "[::ffff:1.2.3.4]:+1", "[fe80::1%eth0]:0", ".:1", ":7000", "edge:", "\u212A:1", "a..:65536", "x:0x10"} {
		f.Add(s, "edge:7000")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ka, kb := EdgeAddressKey(a), EdgeAddressKey(b)
		if EdgeAddressKey(ka) != ka {
			t.Fatalf("EdgeAddressKey(%q) = %q, whose key is %q", a, ka, EdgeAddressKey(ka))
		}
		if ka != kb || a == b {
			return
		}
		ha, pa, erra := net.SplitHostPort(a)
		hb, pb, errb := net.SplitHostPort(b)
		if erra != nil || errb != nil {
			if a != b {
				t.Fatalf("%q and %q (not both host:port) share key %q", a, b, ka)
			}
			return
		}
		if EdgePort(pa) != EdgePort(pb) {
			t.Fatalf("%q and %q: ports %q and %q merged", a, b, pa, pb)
		}
		ipa, ea := netip.ParseAddr(ha)
		ipb, eb := netip.ParseAddr(hb)
		switch {
		case ea == nil && eb == nil:
			if ipa.Unmap() != ipb.Unmap() {
				t.Fatalf("%q and %q: addresses merged", a, b)
			}
		case ea == nil || eb == nil:
			t.Fatalf("%q and %q: an address and a name merged", a, b)
		default:
			na, nb := strings.TrimSuffix(ha, "."), strings.TrimSuffix(hb, ".")
			if (na == "" || nb == "") && ha != hb || !asciiFoldEqual(na, nb) {
				t.Fatalf("%q and %q: names %q and %q merged", a, b, ha, hb)
			}
		}
	})
}

// asciiFoldEqual: x and y are equal with ASCII letters' case ignored.
func asciiFoldEqual(x, y string) bool {
	if len(x) != len(y) {
		return false
	}
	for i := 0; i < len(x); i++ {
		cx, cy := x[i], y[i]
		if 'A' <= cx && cx <= 'Z' {
			cx += 'a' - 'A'
		}
		if 'A' <= cy && cy <= 'Z' {
			cy += 'a' - 'A'
		}
		if cx != cy {
			return false
		}
	}
	return true
}

// An entry repeated more than once is named as a repeat of the first
// entry that listed it, not of another repeat.
func TestEdgeAddressRepeatedThriceNamesTheFirst(t *testing.T) {
	n := &Node{Node: NodeIdentity{ID: "a", Token: "t"}, Edge: NodeEdge{Addresses: []string{"edge:7000", "EDGE:7000", "edge.:07000"}}}
	err := n.Normalize()
	want := `edge.addresses[2] "edge.:07000" is listed twice (as edge.addresses[0] "edge:7000")`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
}
