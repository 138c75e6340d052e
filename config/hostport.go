package config

// Host and port checks shared by every address key (listen.*, edge.address(es),
// cluster.redis.address, tracing.endpoint).

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// checkHostPort reports an address that is not host:port with a numeric
// port: digits only, as the config is read by people (strconv.Atoi and
// the dialer take +7000 and -0, which are no ports). An address to listen
// on may have port 0 (any free port: tests and local runs) and an empty
// host (every interface). An address dialled may have neither: nothing
// answers on port 0, and an empty host is the local system only to a
// single dial (as one of edge.addresses it is looked up as a name, which
// fails on every attempt, and TLS has no name to verify), so
// 127.0.0.1 or localhost says the same thing plainly. The host name
// itself is checked by checkHostName.
func checkHostPort(p *problems, key, addr string, dial bool) {
	host, port, err := net.SplitHostPort(addr)
	switch {
	case err != nil || strings.ContainsAny(host, "/@ \t"):
		// A URL (scheme://, user:password@) is not host:port.
		p.add("%s %s is not host:port", key, quoteSafe(addr))
		return
	case strings.Contains(host, "%") && !zonedIPv6(host):
		// Neither an address nor a name: looked up as a name, it fails
		// ("no such host") at every attempt.
		p.add("%s %s has a zone (%%) but no IPv6 address with a zone", key, quoteSafe(addr))
	case dial && host == "":
		p.add("%s %s has no host (write 127.0.0.1 or localhost for this machine)", key, quoteSafe(addr))
	}
	checkHostName(p, key, addr, host)
	if n, ok := portNumber(port); !ok {
		p.add("%s %s has a bad port (a number from 0 to 65535, digits only)", key, quoteSafe(addr))
	} else if dial && n == 0 {
		p.add("%s %s has port 0, which cannot be dialled", key, quoteSafe(addr))
	}
}

// Longest host name and label resolvers take (RFC 1035 section 2.3.4:
// 255 octets on the wire are 253 characters written, without the
// trailing dot).
const (
	maxHostName  = 253
	maxHostLabel = 63
)

// checkHostName reports, once, a host name no resolver looks up: dots
// alone (".", the DNS root, names no host), an empty label (a..b, .a, a..:
// a typo, which Go's resolver refuses as "no such host" without asking
// DNS), longer than maxHostName (one trailing dot, the root, not counted)
// or with a label longer than maxHostLabel (DNS cannot carry either, and
// the resolver refuses them the same way). Only a hosts-file entry could
// name such a host, which no deployment relies on. An empty host is the
// caller's to judge (every interface to listen on; refused to dial), and
// an IP address (a zone included) is not a name: neither is checked. addr
// is the value as written, for the message.
func checkHostName(p *problems, key, addr, host string) {
	if host == "" {
		return
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return
	}
	if strings.Trim(host, ".") == "" {
		p.add("%s %s has no host name (only dots)", key, quoteSafe(addr))
		return
	}
	name := strings.TrimSuffix(host, ".")
	if len(name) > maxHostName {
		p.add("%s %s has a host name of %d characters (at most %d)", key, quoteSafe(addr), len(name), maxHostName)
		return
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" {
			p.add("%s %s has an empty label in its host name (a dot at its start or two in a row)", key, quoteSafe(addr))
			return
		}
		if len(label) > maxHostLabel {
			p.add("%s %s has a host name label of %d characters (at most %d between dots)", key, quoteSafe(addr), len(label), maxHostLabel)
			return
		}
	}
}

// zonedIPv6 reports whether host is an IPv6 address with a non-empty
// zone (fe80::1%eth0), the one host a zone belongs to.
func zonedIPv6(host string) bool {
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Is6() && ip.Zone() != ""
}

// sameListenSocket reports whether two listen addresses bind one socket
// as written: compared as EdgeAddressKey spells them (:08080 is :8080,
// LOCALHOST is localhost), port 0 (a free port each) never. A wildcard
// host beside another on the same port is listenOverlap's.
func sameListenSocket(a, b string) bool {
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return false
	}
	if n, ok := portNumber(port); !ok || n == 0 {
		return false
	}
	return EdgeAddressKey(a) == EdgeAddressKey(b)
}

// listenOverlap reports whether two listen addresses that are not one
// socket still cannot both bind: they share a port (not 0) and one of
// them listens on every address (an empty host, 0.0.0.0, :: or another
// spelling of an unspecified address). Go listens on such an address
// with one dual-stack socket, so it takes the port on every IPv4 and
// IPv6 address, and the second bind fails ("address already in use") on
// Linux whatever the other host (127.0.0.1, ::1, a name); systems that
// let a specific bind beside a wildcard one would split the port's
// traffic between the two listeners by destination address, which no
// config means. wildcard is the address that listens everywhere. Two
// different specific hosts on one port (127.0.0.1 and 10.0.0.1, or a
// name and the address it resolves to) are not caught.
func listenOverlap(a, b string) (wildcard string, overlap bool) {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return "", false
	}
	na, okA := portNumber(pa)
	nb, okB := portNumber(pb)
	if !okA || !okB || na == 0 || na != nb {
		return "", false
	}
	switch {
	case anyAddress(ha):
		return a, true
	case anyAddress(hb):
		return b, true
	}
	return "", false
}

// anyAddress reports whether a listen host means every address of the
// machine.
func anyAddress(host string) bool {
	if host == "" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsUnspecified()
}

// portNumber reads a port written in decimal digits only (leading zeros
// are kept as the dialer reads them: 07000 is 7000).
func portNumber(port string) (int, bool) {
	if port == "" || strings.TrimLeft(port, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(port)
	return n, err == nil && n <= 65535
}

// quoteSafe quotes a value for a problem message without the credentials
// it may carry (user:password@ in a URL or address): problems are printed
// and logged (a rejected reload), secrets never are.
func quoteSafe(s string) string {
	if strings.Contains(s, "@") {
		return "(value not shown: it may hold credentials)"
	}
	return strconv.Quote(s)
}
