package config

import (
	"net"
	"strings"
	"testing"
)

// A host with a zone (%) that is no IPv6 address with a zone is neither
// an address nor a name: the dialer and the listener look it up as a
// name and fail ("no such host") on every attempt. Every host:port key
// refuses it; an IPv6 address with a zone, known to this machine or
// not, is accepted as written.
func TestHostPortKeysRefuseZoneOnNoIPv6Address(t *testing.T) {
	for _, addr := range []string{"[::1%]:7000", "[127.0.0.1%eth0]:7000", "edge%eth0:7000", "[edge%eth0]:7000"} {
		// The premise: no such address can be dialled.
		if _, err := net.ResolveTCPAddr("tcp", addr); err == nil {
			t.Fatalf("%q resolves; the premise is wrong", addr)
		}
		for _, k := range dialaddrKeys {
			if got := dialaddrProblems(k.norm(addr), k.key); !strings.Contains(got, "zone") {
				t.Errorf("%s %q: problems %q; want it refused for its zone", k.key, addr, got)
			}
		}
	}
	for _, addr := range []string{"[fe80::1%eth0]:7000", "[fe80::1%2]:7000", "[::ffff:10.0.0.1%eth0]:7000"} {
		for _, k := range dialaddrKeys {
			if got := dialaddrProblems(k.norm(addr), k.key); got != "" {
				t.Errorf("%s %q: %s; want it accepted", k.key, addr, got)
			}
		}
	}
}
