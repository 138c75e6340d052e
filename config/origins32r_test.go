package config

import (
	"strings"
	"testing"
)

// A cors.allowed_origins entry is stored as a browser sends Origin, so
// that it can match: a port with leading zeros as its number (0443 is the
// default port, left out), an IPv6 address compressed in lower case as
// the URL standard writes it (an IPv4-mapped one in hex).
func TestOriginPortsAndIPv6AsBrowsersSendThem(t *testing.T) {
	for in, want := range map[string]string{
		"https://a.example:0443":        "https://a.example",
		"http://a.example:080":          "http://a.example",
		"http://a.example:08080":        "http://a.example:8080",
		"http://[0:0::1]:5173":          "http://[::1]:5173",
		"http://[0:0:0:0:0:0:0:1]":      "http://[::1]",
		"http://[2001:DB8:0:0:1::1]":    "http://[2001:db8::1:0:0:1]",
		"http://[::FFFF:127.0.0.1]:80":  "http://[::ffff:7f00:1]",
		"http://[::ffff:0.0.0.0]:5173":  "http://[::ffff:0:0]:5173",
		"https://Chat.Example.com:443":  "https://chat.example.com",
		"chrome-extension://abcdefghij": "chrome-extension://abcdefghij",
	} {
		c := minimalEdge()
		c.CORS.AllowedOrigins = []string{in}
		if err := c.Normalize(); err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if got := c.CORS.AllowedOrigins[0]; got != want {
			t.Errorf("%s stored as %s, want %s (as browsers send it)", in, got, want)
		}
	}
}

// Each host problem is told once per entry, however often it occurs in
// the name; a control character past ASCII (U+0080) is not ASCII either;
// and the listener named as listening everywhere is the wildcard one,
// whichever key it is.
func TestHostProblemsToldOnceAndTheWildcardNamed(t *testing.T) {
	for _, tc := range []struct{ origin, want string }{
		{"https://a..b..example", `cors.allowed_origins[0] "https://a..b..example" has an empty label in its host name`},
		{"https://a\u0080.example", `has a host name that is not ASCII`},
	} {
		c := minimalEdge()
		c.CORS.AllowedOrigins = []string{tc.origin}
		err := c.Normalize()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.origin, err, tc.want)
			continue
		}
		if n := strings.Count(err.Error(), "cors.allowed_origins[0]"); n != 1 {
			t.Errorf("%q: told %d times, want once: %v", tc.origin, n, err)
		}
	}
	for _, tc := range []struct{ http, node, wild string }{
		{"127.0.0.1:9000", "0.0.0.0:9000", "0.0.0.0:9000"},
		{"[::]:9000", "127.0.0.1:9000", "[::]:9000"},
		{"localhost:9000", ":9000", ":9000"},
	} {
		c := minimalEdge()
		c.Listen.HTTP, c.Listen.Node = tc.http, tc.node
		err := c.Normalize()
		want := "share a port, and " + quoteSafe(tc.wild) + " listens on every address"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s and %s: err = %v, want %q", tc.http, tc.node, err, want)
		}
	}
}

// A host the URL standard reads as an IPv4 address (its last label a
// number) matches only written as browsers send it, four decimal numbers:
// any other spelling is refused; names with numbers in them pass.
func TestOriginHostsEndingInANumber(t *testing.T) {
	for _, o := range []string{"http://127.1:5173", "http://010.0.0.1", "http://127.0.0.1.", "http://0x7f.0.0.1",
		"https://example.123", "https://a.0x1F", "http://1.2.3.4.5"} {
		c := minimalEdge()
		c.CORS.AllowedOrigins = []string{o}
		err := c.Normalize()
		want := "cors.allowed_origins[0] " + quoteSafe(o) + " has a host ending in a number"
		if err == nil || !strings.Contains(err.Error(), want) || strings.Count(err.Error(), "cors.allowed_origins[0]") != 1 {
			t.Errorf("%s: err = %v, want once %q", o, err, want)
		}
	}
	c := minimalEdge()
	c.CORS.AllowedOrigins = []string{"http://127.0.0.1:5173", "https://123.example", "https://a1.b2", "https://x.0xg", "http://[::1]"}
	if err := c.Normalize(); err != nil {
		t.Errorf("refused: %v", err)
	}
}
