package stackbench

import (
	"strings"
	"testing"
)

// Held streams through a real edge and node keep two of the edge's
// per-request objects a size class smaller than before the thirty-fifth
// pass: the gateway's call (the request on its way to a provider, held by
// its handler for as long as the stream) in the 288-byte class, its flags
// packed after a one-byte operation and no embedding options in it (368 B,
// in 384, before); and the infoWriter (the connection's writer with the
// request's reqInfo) in the 176-byte class, the outcome status 32 bits
// beside the linger flag (184 B, in 192, before).
//
// And none of the objects a context.AfterFunc on the request context
// left behind: the client-gone watch's callback and its closure (160 B)
// and the request context's children map (256 B), which the first
// AfterFunc (dispatch's bound on sending the request) made and no stop
// frees; the relay's and the send's own waits observe the context's Done
// instead (nodewire.Stream.SetDone).
func TestHeldStreamMemorySites35(t *testing.T) {
	const n = 20
	h := heldStreamMemory33(t, n)
	var call, writer float64
	for _, s := range h.sites {
		// Each site's own frame: the struct, not what it points to, which
		// other functions allocate.
		switch {
		case strings.HasPrefix(s.key, "context.AfterFunc "), strings.Contains(s.key, "(*cancelState).watch"):
			t.Errorf("%.0f B/stream in a context.AfterFunc: %s", float64(s.bytes)/n, s.key)
		case strings.HasPrefix(s.key, "maps.") && strings.Contains(s.key, "dispatch.openStream"):
			t.Errorf("%.0f B/stream in a map made under openStream (the request context's children): %s", float64(s.bytes)/n, s.key)
		case strings.HasPrefix(s.key, "gateway.(*Server).chatCall "):
			call += float64(s.bytes) / n
		case strings.HasPrefix(s.key, "gateway.infoHandler.ServeHTTP "):
			writer += float64(s.bytes) / n
		}
	}
	if call == 0 || call > 288 {
		t.Errorf("chatCall holds %.0f B/stream, want its call alone in the 288-byte class (it was 384)", call)
	}
	if writer == 0 || writer > 176 {
		t.Errorf("infoHandler holds %.0f B/stream, want its infoWriter alone in the 176-byte class (it was 192)", writer)
	}
}
