package nodewire

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An answer's head frames cost what their fast paths make them cost, end
// to end over a stream (Send, then RecvLent), and through DecodeEnvelope:
// the STATUS and USAGE frames decoded by hand, every receive buffer and
// every envelope not handed to the caller given back to its pool. A
// fallback to the generic decoder, or a buffer or envelope left to the
// collector, shows as one allocation more per frame. (Under -race the
// pools drop what they are given at random, so the counts do not hold.)
func TestHeadFramesAllocations42m(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool keeps nothing reliably under -race")
	}
	send, recv := lentPair(t)
	next := lentNext(t, recv)
	_ = next() // lentPair's STATUS frame
	for _, c := range []struct {
		name      string
		f         *iop.ProviderTunnelFrame
		recv, dec float64 // at most, per frame: Send and RecvLent; DecodeEnvelope
	}{
		// The envelope (the caller's) and the run id.
		{"end", &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_END, End: true, Sequence: 9, RunId: "run_1"}, 2, 2},
		// The envelope, the headers' structs and pointers, one string.
		{"status", headFrames()[0], 4, 5},
		// The envelope, the usage, one string.
		{"usage", headFrames()[3], 3, 4},
		{"body", &iop.ProviderTunnelFrame{Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: 9, Body: []byte("data: x\n\n")}, 0, 1},
	} {
		env := tunnelFrameEnv(c.f)
		if n := testing.AllocsPerRun(200, func() {
			if err := send.Send(env); err != nil {
				t.Fatal(err)
			}
			if got := next(); got.GetProviderTunnelFrame().GetKind() != c.f.GetKind() {
				t.Fatalf("%s: received %v", c.name, got)
			}
		}); n > c.recv {
			t.Errorf("%s: Send and RecvLent: %v allocations, want at most %v", c.name, n, c.recv)
		}
		p := marshalFrame(t, c.f)
		if n := testing.AllocsPerRun(200, func() {
			if _, err := DecodeEnvelope(p); err != nil {
				t.Fatal(err)
			}
		}); n > c.dec {
			t.Errorf("%s: DecodeEnvelope: %v allocations, want at most %v", c.name, n, c.dec)
		}
	}
	// A tunnelled request, as the node decodes it (Recv's DecodeEnvelope).
	p := requestPayload(t, tunnelRequestEnvelope().GetProviderTunnelRequest())
	if n := testing.AllocsPerRun(200, func() {
		if _, err := DecodeEnvelope(p); err != nil {
			t.Fatal(err)
		}
	}); n > 6 {
		t.Errorf("request: DecodeEnvelope: %v allocations, want at most 6", n)
	}
}
