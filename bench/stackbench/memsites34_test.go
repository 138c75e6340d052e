package stackbench

import (
	"strings"
	"testing"
)

// Held streams through a real edge and node keep none of the three
// per-stream objects the thirty-fourth pass removed from the edge's
// handler: gin's Keys map holding the request's reqInfo (336 B; the
// reqInfo now rides in the gateway's writer wrapper), dispatch's Stream
// handle apart from its exchange (24 B; OpenTunnel allocated it), and
// the mux stream's write-notify channel, made only when a writer waits
// (96 B; the site newMuxStream then holds the stream and its read-notify
// channel alone).
func TestHeldStreamMemorySites(t *testing.T) {
	const n = 20
	h := heldStreamMemory33(t, n)
	var mux float64
	for _, s := range h.sites {
		per := float64(s.bytes) / n
		switch {
		case strings.HasPrefix(s.key, "maps.NewEmptyMap ") && strings.Contains(s.key, "gateway.(*Server).requestID"):
			// The map requestID makes (gin's Keys); the response header
			// map it fills is net/http's, made before the handler runs.
			t.Errorf("%.0f B/stream in a map made by requestID (gin's Keys): %s", per, s.key)
		case strings.HasPrefix(s.key, "dispatch.(*Lease).OpenTunnel "):
			t.Errorf("%.0f B/stream allocated by OpenTunnel itself (a Stream handle apart from its exchange): %s", per, s.key)
		case strings.HasPrefix(s.key, "nodewire.newMuxStream "):
			mux += per
		}
	}
	// The stream and one channel of capacity 1 of an empty struct (96 B):
	// 352 B with Go 1.26; with both channels it was 464.
	if mux == 0 || mux > 464-96 {
		t.Errorf("newMuxStream holds %.0f B/stream, want the stream and its read-notify channel alone (~352)", mux)
	}
}
