package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/iop-gateway/iop/config"
)

// headRouteURL fills a route's parameters with values the edge answers.
func headRouteURL(path string) string {
	r := strings.NewReplacer("*id", "demo", ":id", nodeID, ":type", "usage")
	return strings.TrimSuffix(r.Replace(path), "/")
}

// Every GET route answers HEAD as it answers GET: the same status and
// headers (Content-Type; Content-Length when GET has one), no body, and
// the same refusal without credentials. Load balancers and uptime
// monitors probe with HEAD; it was a 405 on every GET path but the probes
// and the status page. The routes are the router's own, so a new GET
// route is covered as it is added.
func TestHeadAnsweredAsGetOnEveryGetRoute(t *testing.T) {
	cfg := edgeConfig([]config.ProviderSpec{mockProvider("mock", nil)}, modelOn("demo", "mock", "mock-echo"))
	cfg.Auth.APIKeys = []string{"sk-app"}
	cfg.Auth.AdminToken = "admin-secret"
	e := startEdge(t, cfg)
	startNode(t, e)
	c := httpClient(t)
	routes := e.Server.Handler().(interface{ Routes() gin.RoutesInfo }).Routes()
	gets := 0
	for _, rt := range routes {
		if rt.Method != http.MethodGet {
			continue
		}
		gets++
		url := e.URL + headRouteURL(rt.Path)
		cred := map[string]string{"Authorization": "Bearer sk-app"}
		if strings.HasPrefix(rt.Path, "/admin") {
			cred = map[string]string{"Authorization": "Bearer admin-secret"}
		}
		for _, hdr := range []map[string]string{cred, nil} {
			get := do(t, c, http.MethodGet, url, "", hdr)
			head := do(t, c, http.MethodHead, url, "", hdr)
			again := do(t, c, http.MethodGet, url, "", hdr)
			what := "HEAD " + url
			if hdr == nil {
				what += " without credentials"
			}
			if head.Status != get.Status || head.Status != again.Status {
				t.Errorf("%s: %d, GET %d then %d (%s)", what, head.Status, get.Status, again.Status, head.Body)
				continue
			}
			if len(head.Body) != 0 {
				t.Errorf("%s: a body of %d bytes", what, len(head.Body))
			}
			for _, h := range []string{"Content-Type", "Cache-Control", "Content-Security-Policy", "X-Content-Type-Options"} {
				if got, want := head.Header.Get(h), get.Header.Get(h); got != want {
					t.Errorf("%s: %s %q, GET has %q", what, h, got, want)
				}
			}
			// A body whose length changes between two GETs (counters)
			// is only asked to be announced as GET announces it.
			getLen, headLen := get.Header.Get("Content-Length"), head.Header.Get("Content-Length")
			if getLen != "" && headLen == "" || getLen == again.Header.Get("Content-Length") && headLen != getLen {
				t.Errorf("%s: Content-Length %q, GET has %q then %q", what, headLen, getLen, again.Header.Get("Content-Length"))
			}
		}
	}
	if gets < 8 {
		t.Fatalf("%d GET routes; the router lists %v", gets, routes)
	}
}
