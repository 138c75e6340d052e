package h1client

import (
	"io"
	"net/http"
	"testing"
)

// A protocol upgrade (a WebSocket, say) is not this transport's to carry:
// its 101 answer turns the connection into something else, which only the
// fallback transport hands back. It goes there, never to the upstream
// from here.
func TestUpgradeGoesToFallback(t *testing.T) {
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "plain") })
	fb := &fallbackCounter{RoundTripper: http.DefaultTransport}
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	tr := New(Options{Fallback: fb})
	defer tr.Close()
	req, err := http.NewRequest("GET", srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if fb.n.Load() != 1 {
		t.Fatalf("upgrade request sent by this transport (fallback used %d times, %d connections)", fb.n.Load(), conns.Load())
	}
}
