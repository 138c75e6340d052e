package dispatch

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An APPLIED answer that arrives for a session the node has since replaced
// changes nothing: the new session declared its own capabilities at ready,
// and the old session's answer (here declaring no tunnel) must not
// overwrite them.
func TestAppliedAnswerOfReplacedSessionIgnored(t *testing.T) {
	f := capableFixture(t)
	old := f.d.nodes["a"].owner
	f.d.Closed(old, nil)
	f.up("a")
	f.d.mu.Lock()
	spec := f.d.cfg.Node("a")
	f.d.mu.Unlock()
	f.d.applied("a", old, spec, []*iop.AdapterCapabilities{{Adapter: "run"}, {Adapter: "tun"}})

	l := mustAcquire(t, f.d, Request{Model: "m", NeedsTunnel: true})
	defer l.Release(ReasonCompleted)
	if l.ProviderID != "tun" {
		t.Fatalf("leased %s, want tun", l.ProviderID)
	}
}
