package dispatch

import (
	"context"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func offline(prov string) []*iop.ProviderSnapshot {
	return []*iop.ProviderSnapshot{{ProviderId: prov, Health: iop.HealthState_HEALTH_STATE_OFFLINE}}
}

func healthy(prov string) []*iop.ProviderSnapshot {
	return []*iop.ProviderSnapshot{{ProviderId: prov, Health: iop.HealthState_HEALTH_STATE_OK}}
}

// A provider its node reports offline gets no request, however idle; a
// request queued for it meanwhile is served as soon as it is reported
// back.
func TestOfflineProviderGetsNothingUntilBack(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), []tModel{{name: "m", timeout: 60, cands: []string{"n1/p"}}}), nil)
	c := f.up("n1")
	f.d.setHealth("n1", c, offline("p"))

	_, err := f.d.Acquire(context.Background(), Request{Model: "m", NoWait: true})
	wantErr(t, err, ErrNoProvider)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := f.enqueue(ctx, Request{Model: "m"})
	f.d.setHealth("n1", c, healthy("p"))
	recvLease(t, w).Release(ReasonCompleted)
}

// Among several candidates, one reported offline is passed over even when
// it is the least loaded.
func TestOfflineCandidatePassedOver(t *testing.T) {
	nodes := []tNode{{id: "a", provs: []tProv{{name: "p", cap: 4}}}, {id: "b", provs: []tProv{{name: "p", cap: 4}}}}
	f := newFixture(t, buildCfg(t, nodes, []tModel{{name: "m", cands: []string{"a/p", "b/p"}}}), nil)
	ca := f.up("a")
	f.up("b")
	f.d.setHealth("a", ca, offline("p"))
	var ls []*Lease
	for range 4 {
		l := mustAcquire(t, f.d, Request{Model: "m", NoWait: true})
		if l.NodeID != "b" {
			t.Fatalf("leased on %s, which is offline", l.NodeID)
		}
		ls = append(ls, l)
	}
	for _, l := range ls {
		l.Release(ReasonCompleted)
	}
}

// A provider reported offline by a node's last session is dispatched to by
// its next one: the new session's backend has not been reported on yet.
func TestNewSessionForgetsOfflineHealth(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	c := f.up("n1")
	f.d.setHealth("n1", c, offline("p"))
	_, err := f.d.Acquire(context.Background(), Request{Model: "m", NoWait: true})
	wantErr(t, err, ErrNoProvider)

	f.d.Closed(c, nil)
	f.up("n1")
	mustAcquire(t, f.d, Request{Model: "m", NoWait: true}).Release(ReasonCompleted)
}

// A provider just reported offline counts as down from that report on, not
// from whenever it last went offline: within the model's offline grace a
// request queues for it (the backend usually comes back) rather than
// failing at once.
func TestOfflineReportStartsTheGrace(t *testing.T) {
	f := graceFixture(t, 60)
	c := f.up("a")
	f.d.mu.Lock()
	// Live since long ago: what it went down before says nothing now.
	f.d.resources[resKey{"a", "p"}].downSince = time.Now().Add(-time.Hour)
	f.d.mu.Unlock()
	f.d.setHealth("a", c, offline("p"))

	ctx, cancel := context.WithCancel(context.Background())
	w := f.enqueue(ctx, Request{Model: "m"})
	cancel()
	wantErr(t, recv(t, w).err, context.Canceled)
}
