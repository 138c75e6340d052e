package dispatch

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A fence shares its decodes of queued frames out between the node's
// leases (fenceQueuedWalk): with 8 leases each exchange decodes 128 from
// its first unread frame, then only its last. A terminal further in,
// behind which a broken node sent more, is not looked for: the lease
// returns node_lost, as it did before the walk existed.
func TestFenceSharesItsQueuedWalkBetweenLeases(t *testing.T) {
	const leases = 8
	envs := []*iop.Envelope{runEnv(iop.RunEventType_RUN_EVENT_TYPE_START)}
	for range fenceQueuedWalk/leases + 10 {
		envs = append(envs, runEnv(iop.RunEventType_RUN_EVENT_TYPE_DELTA))
	}
	envs = append(envs, runEnv(iop.RunEventType_RUN_EVENT_TYPE_COMPLETE), runEnv(iop.RunEventType_RUN_EVENT_TYPE_DELTA))
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, leases), oneNodeModels), nil)
	n := startWireNode(t, f, answerWholeThenGo(envs...))
	all := make([]*Lease, leases)
	for i := range all {
		all[i] = mustAcquire(t, f.d, Request{Model: "m"})
	}
	rs := mustOpenRun(t, all[0])
	waitFor(t, "the answer at the edge", rs.Ready)
	_ = n.cc.Close()
	waitFor(t, "the fence", func() bool { rel, _ := all[0].Released(); return rel })
	if _, reason := all[0].Released(); reason != ReasonNodeLost {
		t.Fatalf("a terminal past the fence's share, more after it: released as %q, want %q", reason, ReasonNodeLost)
	}
}
