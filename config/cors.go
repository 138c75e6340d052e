package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// EdgeCORS lets browser apps on other origins call /v1/* (the OpenAI and
// Anthropic surfaces) directly, with the user's own key. Off by default:
// no CORS header is sent and a preflight is answered as today (404).
type EdgeCORS struct {
	// AllowedOrigins are the exact origins (scheme://host[:port], as a
	// browser sends them in Origin) allowed to call, or "*" alone for any.
	// IOP_CORS_ALLOWED_ORIGINS takes them comma separated. Applied on
	// reload.
	AllowedOrigins []string `mapstructure:"allowed_origins"`
}

// Enabled reports whether any origin is allowed.
func (c *EdgeCORS) Enabled() bool { return len(c.AllowedOrigins) > 0 }

// AnyOrigin reports whether every origin is allowed ("*").
func (c *EdgeCORS) AnyOrigin() bool { return len(c.AllowedOrigins) == 1 && c.AllowedOrigins[0] == "*" }

func (c *EdgeCORS) normalize(p *problems) {
	for i := range c.AllowedOrigins {
		o := strings.TrimSpace(c.AllowedOrigins[i])
		c.AllowedOrigins[i] = o
		if o == "*" {
			if len(c.AllowedOrigins) > 1 {
				p.add("cors.allowed_origins[%d] is \"*\", which must be the only entry", i)
			}
			continue
		}
		canon, host, ok := canonicalOrigin(o)
		if !ok {
			p.add("cors.allowed_origins[%d] %s is not an origin: scheme://host[:port], without path (not even /), wildcard or credentials", i, quoteSafe(o))
			continue
		}
		checkOriginHost(p, fmt.Sprintf("cors.allowed_origins[%d]", i), o, host)
		c.AllowedOrigins[i] = canon
		if j := slices.Index(c.AllowedOrigins[:i], canon); j >= 0 {
			p.add("cors.allowed_origins[%d] repeats cors.allowed_origins[%d]", i, j)
		}
	}
}

// canonicalOrigin is o as a browser serialises it in Origin (RFC 6454
// §6.1): scheme and host in lower case, the scheme's default port left
// out. Configured otherwise ("https://Chat.example.com:443") it would
// never match. "null" (sandboxed frames, file: pages) is not an origin
// here: allowing it would let any sandboxed page in.
// host is its host as url.Parse reads it (unbracketed, unescaped), for
// checkOriginHost.
func canonicalOrigin(o string) (canon, host string, ok bool) {
	u, err := url.Parse(o)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" || u.User != nil ||
		u.Path != "" || u.RawPath != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" ||
		strings.ContainsAny(o, "#*") || strings.HasSuffix(u.Host, ":") {
		return "", "", false
	}
	scheme := strings.ToLower(u.Scheme)
	host = u.Hostname()
	canonHost := strings.ToLower(host)
	port := u.Port()
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", "", false
		}
		port = strconv.Itoa(n) // as browsers send it: 0443 is 443
	}
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	if strings.Contains(canonHost, ":") {
		if ip, err := netip.ParseAddr(canonHost); err == nil {
			canonHost = originIPv6(ip)
		}
		canonHost = "[" + canonHost + "]" // IPv6
	}
	if port != "" {
		canonHost += ":" + port
	}
	return scheme + "://" + canonHost, host, true
}

// originIPv6 is an IPv6 address as the URL standard serialises it in
// Origin: the longest run of zero groups compressed (the first of equal
// runs, none of one group), groups in lower-case hex, and an IPv4-mapped
// address in hex too (::ffff:7f00:1, where netip writes ::ffff:127.0.0.1).
// Written otherwise ([0:0::1]) the entry would never match.
func originIPv6(ip netip.Addr) string {
	if !ip.Is4In6() {
		return ip.String() // RFC 5952, the standard's serialisation
	}
	b := ip.As16()
	return fmt.Sprintf("::ffff:%x:%x", uint16(b[12])<<8|uint16(b[13]), uint16(b[14])<<8|uint16(b[15]))
}

// checkOriginHost reports an origin's host that no browser sends in
// Origin, so that the entry would never match: none (https://:8443), one
// checkHostName refuses (https://a..example), an IPv6 address with a zone
// (the URL standard has no zones), or a name that is not ASCII (browsers
// send it in punycode: https://xn--bcher-kva.example, not
// https://bücher.example). o is the entry as written, for the message.
func checkOriginHost(p *problems, key, o, host string) {
	switch ip, err := netip.ParseAddr(host); {
	case host == "":
		p.add("%s %s has no host", key, quoteSafe(o))
	case err == nil && ip.Zone() != "":
		p.add("%s %s has an IPv6 zone, which no browser sends in Origin", key, quoteSafe(o))
	case err != nil && endsInNumber(host):
		p.add("%s %s has a host ending in a number that is not an IPv4 address as browsers send it (four decimal numbers, no trailing dot)", key, quoteSafe(o))
	case strings.ContainsFunc(host, func(r rune) bool { return r >= utf8.RuneSelf }):
		p.add("%s %s has a host name that is not ASCII: write it as browsers send it, in punycode (xn--…)", key, quoteSafe(o))
	default:
		checkHostName(p, key, o, host)
	}
}

// endsInNumber reports whether the URL standard reads host as an IPv4
// address: its last label (one trailing dot dropped) is decimal digits or
// 0x hex. Browsers send such a host as four decimal numbers
// (http://127.1 and http://0x7f.0.0.1. as http://127.0.0.1, and refuse
// one that is no address), so only that spelling can match.
func endsInNumber(host string) bool {
	name := strings.TrimSuffix(host, ".")
	last := name[strings.LastIndexByte(name, '.')+1:]
	if hex, ok := strings.CutPrefix(strings.ToLower(last), "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}
