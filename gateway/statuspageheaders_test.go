package gateway_test

import (
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/config"
)

// The status page refuses to be framed in browsers that know only
// X-Frame-Options (CSP frame-ancestors is the newer form of it), and
// keeps no referrer.
func TestStatusPageRefusesFraming(t *testing.T) {
	e := pageStack(t, nil)
	r := do(t, httpClient(t), http.MethodGet, e.URL+"/admin", "", nil)
	if got := r.Header.Get("X-Frame-Options"); got != "DENY" {
		t.Errorf("X-Frame-Options %q, want DENY", got)
	}
	if got := r.Header.Get("Referrer-Policy"); got != "no-referrer" {
		t.Errorf("Referrer-Policy %q, want no-referrer", got)
	}
}

// Before any node event, the feed is an empty list (the page and other
// readers iterate it), never null, and like the page it is not cached.
func TestAdminEventsEmptyIsAList(t *testing.T) {
	p := mockProvider("mock", nil)
	cfg := edgeConfig([]config.ProviderSpec{p}, modelOn("demo", "mock", "mock-echo"))
	cfg.Auth.AdminToken = pageAdminToken
	e := startEdge(t, cfg) // no node connects: no event yet
	r := do(t, httpClient(t), http.MethodGet, e.URL+"/admin/events", "", map[string]string{"Authorization": "Bearer " + pageAdminToken})
	if r.Status != http.StatusOK || string(r.Body) != `{"events":[]}` {
		t.Fatalf("/admin/events: %d %s, want 200 {\"events\":[]}", r.Status, r.Body)
	}
	if got := r.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", got)
	}
}
