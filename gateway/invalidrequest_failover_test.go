package gateway_test

import (
	"net/http"
	"sync/atomic"
	"testing"
)

// A request the edge cannot encode for the wire (a forwarded header that
// is not valid UTF-8) is the client's fault: it is answered 400 at once,
// never tried on another candidate and never counted as a lost node.
func TestInvalidRequestDoesNotFailOver(t *testing.T) {
	var hits atomic.Int32
	answer := func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		writeJSON(w, http.StatusOK, vllmChatJSON)
	}
	e := twoUpstreams(t, newUpstream(t, answer), newUpstream(t, answer), 0)
	r := do(t, httpClient(t), http.MethodPost, e.URL+"/v1/chat/completions", chatM, map[string]string{"User-Agent": "sdk/\xff"})
	assertError(t, r, http.StatusBadRequest, "invalid_request")
	if got := failovers(t, e, "node_lost"); got != 0 || hits.Load() != 0 {
		t.Errorf("node_lost failovers %v, upstream hits %d; want 0, 0", got, hits.Load())
	}
	waitReleased(t, e, "first")
	waitReleased(t, e, "second")
}
