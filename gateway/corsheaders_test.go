package gateway

import (
	"strings"
	"testing"
)

// The requested headers are answered in the order asked, lower case,
// across repeated Access-Control-Request-Headers lines, without those the
// surfaces do not read, and only the first maxCORSRequestHeaders names
// are looked at.
func TestCORSAllowHeaders(t *testing.T) {
	got := corsAllowHeaders([]string{"Authorization , X-Unknown,,X-Stainless-OS", "X-IOP-Session-Id, anthropic-version"})
	if want := "authorization, x-stainless-os, x-iop-session-id, anthropic-version"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	many := strings.Repeat("x-junk, ", maxCORSRequestHeaders) + "authorization"
	if got := corsAllowHeaders([]string{many}); got != "" {
		t.Errorf("beyond the bound: %q", got)
	}
	if got := corsAllowHeaders(nil); got != "" {
		t.Errorf("none: %q", got)
	}
}

// The bound counts names: the maxCORSRequestHeaders-th is still answered.
func TestCORSAllowHeadersAtTheBound(t *testing.T) {
	last := strings.Repeat("x-junk, ", maxCORSRequestHeaders-1) + "authorization"
	if got := corsAllowHeaders([]string{last}); got != "authorization" {
		t.Errorf("name %d of %d: %q", maxCORSRequestHeaders, maxCORSRequestHeaders, got)
	}
}
