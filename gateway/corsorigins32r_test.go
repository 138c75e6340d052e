package gateway_test

import (
	"net/http"
	"testing"
)

// An allowed origin written otherwise than browsers send it (a default
// port with a leading zero, an IPv6 address uncompressed or IPv4-mapped
// in dotted form) still lets in the Origin a browser sends for it.
func TestCORSOriginsWrittenOtherwiseMatchWhatBrowsersSend(t *testing.T) {
	e := corsStack(t, "https://chat.example.com:0443", "http://[0:0:0:0:0:0:0:1]:05173", "http://[::ffff:127.0.0.1]")
	for _, origin := range []string{"https://chat.example.com", "http://[::1]:5173", "http://[::ffff:7f00:1]"} {
		r := preflight(t, e.URL+"/v1/chat/completions", origin, "authorization")
		if r.Status != http.StatusNoContent || r.Header.Get("Access-Control-Allow-Origin") != origin {
			t.Errorf("%s: %d, Access-Control-Allow-Origin %q: %s", origin, r.Status, r.Header.Get("Access-Control-Allow-Origin"), r.Body)
		}
	}
}
