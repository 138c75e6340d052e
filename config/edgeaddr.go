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
// unmapped (::ffff:10.0.0.1 and 10.0.0.1; a zone is kept, fe80::1%eth0
// being another socket than fe80::1%eth1), a name in lower case and
// without its trailing dot (DNS ignores case, and edge. is the fully
// qualified edge), the port as a number (EdgePort). Text that is not
// host:port is returned as it is.
func EdgeAddressKey(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.Unmap().String()
	} else {
		host = strings.TrimSuffix(strings.ToLower(host), ".")
	}
	return net.JoinHostPort(host, EdgePort(port))
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
