package gateway_test

import (
	"net/http"
	"testing"
)

// A streamed run is an event stream that proxies in front of the edge
// must not buffer (nginx honours X-Accel-Buffering) nor caches keep.
func TestRunStreamHeaders(t *testing.T) {
	e := pageStack(t, nil)
	r := post(t, e, "/v1/chat/completions", chatBody("demo", "hi", true))
	if r.Status != http.StatusOK {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	for name, want := range map[string]string{"Content-Type": "text/event-stream", "X-Accel-Buffering": "no", "Cache-Control": "no-cache"} {
		if got := r.Header.Get(name); got != want {
			t.Errorf("%s %q, want %q", name, got, want)
		}
	}
}
