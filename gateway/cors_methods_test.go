package gateway_test

import (
	"net/http"
	"testing"
)

// A preflight for a method the API does not serve is refused: 405 with
// Allow and the envelope, the allowed origin kept (the browser then
// blames the preflight's status, not the origin), no
// Access-Control-Allow-Methods. It used to get the 204 of an accepted
// preflight. GET and POST are accepted; another origin is refused for
// its origin first.
func TestCORSPreflightUnservedMethod(t *testing.T) {
	for _, origins := range [][]string{{appOrigin}, {"*"}} {
		e := corsStack(t, origins...)
		wantOrigin := appOrigin
		if origins[0] == "*" {
			wantOrigin = "*"
		}
		for _, m := range []string{"DELETE", "PUT", "PATCH", "HEAD", "post", "CONNECT"} {
			r := do(t, httpClient(t), http.MethodOptions, e.URL+"/v1/chat/completions", "", map[string]string{
				"Origin": appOrigin, "Access-Control-Request-Method": m, "Access-Control-Request-Headers": "authorization"})
			assertError(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
			if r.Header.Get("Allow") != "GET, POST" || r.Header.Get("Access-Control-Allow-Origin") != wantOrigin ||
				r.Header.Get("Access-Control-Allow-Methods") != "" || r.Header.Get("Access-Control-Allow-Headers") != "" {
				t.Errorf("%v %s: headers %v", origins, m, r.Header)
			}
		}
		for _, m := range []string{"GET", "POST"} {
			r := do(t, httpClient(t), http.MethodOptions, e.URL+"/v1/models", "", map[string]string{
				"Origin": appOrigin, "Access-Control-Request-Method": m})
			if r.Status != http.StatusNoContent || r.Header.Get("Access-Control-Allow-Methods") != "GET, POST" {
				t.Errorf("%v %s: %d %v", origins, m, r.Status, r.Header)
			}
		}
		if got := requestsByCode(t, e); len(got) != 0 {
			t.Errorf("preflights counted as requests: %v", got)
		}
	}
	e := corsStack(t, appOrigin)
	r := do(t, httpClient(t), http.MethodOptions, e.URL+"/v1/models", "", map[string]string{
		"Origin": otherOrigin, "Access-Control-Request-Method": "DELETE"})
	assertError(t, r, http.StatusForbidden, "origin_not_allowed")
	if h := corsHeaders(r.Header); len(h) != 0 {
		t.Errorf("refused origin's preflight carries %v", h)
	}
}
