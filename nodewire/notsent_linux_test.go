package nodewire

import (
	"testing"

	"github.com/iop-gateway/iop/internal/sockopt"
)

// Both ends of a wire connection bound their socket's unsent bytes, so a
// write deadline measures a peer that stops reading, not the kernel's
// wake-up threshold on a grown send buffer (muxWriteChunk).
func TestWireSocketsBoundUnsent(t *testing.T) {
	ts := startServer(t, newFakeHandler(), ServerConfig{})
	cc, sc := readyPair(t, ts, "node-1")
	if got := sockopt.Unsent(cc.raw); got != wireNotSentLowat {
		t.Errorf("node side TCP_NOTSENT_LOWAT = %d, want %d", got, wireNotSentLowat)
	}
	if got := sockopt.Unsent(sc.raw); got != wireNotSentLowat {
		t.Errorf("edge side TCP_NOTSENT_LOWAT = %d, want %d", got, wireNotSentLowat)
	}
}
