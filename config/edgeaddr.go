package config

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// EdgeAddressKey is an edge address (host:port) in one spelling for one
// socket, as the node compares edge.addresses entries (at load, and when
// it merges the sessions of entries reaching one edge): an IP address
// unmapped (::ffff:10.0.0.1 and 10.0.0.1; a zone is kept as written,
// fe80::1%eth0 being another socket than fe80::1%eth1: %2 is not mapped
// to the interface it numbers, which is the machine's and can change
// while the node runs, and the key must not depend on the machine the
// config is checked on), a name in lower case and
// without its trailing dot (edgeName), the port as a number (EdgePort).
// Text that is not host:port is returned as it is.
func EdgeAddressKey(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.Unmap().String()
	} else {
		host = edgeName(host)
	}
	return net.JoinHostPort(host, EdgePort(port))
}

// edgeName is a host name in one spelling: ASCII letters in lower case,
// as DNS folds case (RFC 4343) and nothing else (a non-ASCII letter is
// another name, one the resolver refuses, even the Kelvin sign that
// strings.ToLower makes a k; and ToLower would turn every invalid byte
// into one U+FFFD), and one trailing dot dropped from a name it leaves a
// name (edge. is the fully qualified edge; a lone dot, the root, is not
// the empty host, the local system; edge.. is no name at all; 10.0.0.1.
// is a name looked up, not the address 10.0.0.1).
func edgeName(host string) string {
	if n, ok := strings.CutSuffix(host, "."); ok && n != "" && !strings.HasSuffix(n, ".") {
		if _, err := netip.ParseAddr(n); err != nil {
			host = n
		}
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; 'A' <= c && c <= 'Z' {
			b := []byte(host)
			for j := i; j < len(b); j++ {
				if c := b[j]; 'A' <= c && c <= 'Z' {
					b[j] = c + ('a' - 'A')
				}
			}
			return string(b)
		}
	}
	return host
}

// EdgePort spells a numeric port as the dialer reads it: 07000 and +7000
// are 7000. Anything else (a service name, which validation refuses) is
// kept as written.
func EdgePort(port string) string {
	n, err := strconv.ParseUint(strings.TrimPrefix(port, "+"), 10, 16)
	if err != nil {
		return port
	}
	return strconv.FormatUint(n, 10)
}
