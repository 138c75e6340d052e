package dispatch

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A refresh answered by a session that has since ended acts on that session
// only: the node's newer session (registered with the current config) is
// neither fenced by RESTART_REQUIRED nor marked by APPLIED, and its leases
// stay out.
func TestRefreshAnswerOfEndedSessionLeavesNewSession(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	old := f.up("n1")
	f.d.Closed(old, nil)
	f.up("n1")
	l := mustAcquire(t, f.d, Request{Model: "m"})

	f.d.restartNode("n1", old)
	f.d.applied("n1", old, f.d.cfg.Node("n1"), []*iop.AdapterCapabilities{})
	if rel, why := l.Released(); rel {
		t.Fatalf("the new session's lease was released (%s) by the old session's answer", why)
	}
	if n := nodeOf(f.d.Status(), "n1"); !n.Connected {
		t.Fatalf("new session fenced: %+v", n)
	}
	if !l.Release(ReasonCompleted) {
		t.Fatal("release")
	}
}
