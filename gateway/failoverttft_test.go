package gateway_test

import (
	"net/http"
	"testing"
)

// A held answer cut after its first body bytes and served by the next
// candidate is one request with one first token: the histogram counts it
// once, not once per attempt.
func TestFailoverCountsFirstTokenOnce(t *testing.T) {
	first := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(vllmChatJSON[:40]))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection drops mid-body
	})
	second := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, vllmChatJSON) })
	e := twoUpstreams(t, first, second, 0)
	r := post(t, e, "/v1/chat/completions", chatM)
	if r.Status != http.StatusOK || string(r.Body) != vllmChatJSON {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	if got := failovers(t, e, "unavailable") + failovers(t, e, "node_lost"); got != 1 {
		t.Fatalf("failovers %v after a body cut before END, want 1", got)
	}
	mfs, err := e.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var count uint64
	for _, mf := range mfs {
		if mf.GetName() == "iop_time_to_first_token_seconds" {
			for _, m := range mf.GetMetric() {
				count += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if count != 1 {
		t.Fatalf("iop_time_to_first_token_seconds counted %d first tokens for one request, want 1", count)
	}
}
