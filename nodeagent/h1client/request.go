package h1client

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/idna"
)

// validateRequest refuses what http.Transport refuses to send: a method
// that is not a token (Request.Write puts it in the request line as is,
// where "GET / HTTP/1.1\r\n…" would be a request of its own), and header
// or trailer fields that are not valid (Request.Write drops a bad name and
// turns CR and LF into spaces, but copies other control bytes).
func validateRequest(req *http.Request) error {
	if req.Method != "" && !validMethod(req.Method) {
		return fmt.Errorf("h1client: invalid method %q", req.Method)
	}
	if err := validateHeader(req.Header); err != "" {
		return fmt.Errorf("h1client: invalid header %s", err)
	}
	if err := validateHeader(req.Trailer); err != "" {
		return fmt.Errorf("h1client: invalid trailer %s", err)
	}
	return nil
}

func validMethod(m string) bool {
	for i := 0; i < len(m); i++ {
		if !httpguts.IsTokenRune(rune(m[i])) {
			return false
		}
	}
	return len(m) > 0
}

// validateHeader is net/http's validateHeaders.
func validateHeader(h http.Header) string {
	for k, vv := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Sprintf("field name %q", k)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				// Not the value: it may be a secret.
				return fmt.Sprintf("field value for %q", k)
			}
		}
	}
	return ""
}

// hostPort is the dial address of u: host:port with the default port, an
// internationalized name in its ASCII form (as net/http dials it, and as
// Request.Write puts it in the Host header).
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
	}
	host := u.Hostname()
	if !isASCII(host) {
		if a, err := idna.Lookup.ToASCII(host); err == nil {
			host = a
		}
	}
	return net.JoinHostPort(host, port)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
