package nodeagent

import (
	"context"
	"sync"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/mock"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A capacity of 0 (or less) is unlimited: the gate never refuses.
func TestGateZeroCapacityIsUnlimited(t *testing.T) {
	for _, capacity := range []int{0, -1} {
		g := &gate{}
		g.setCapacity(capacity)
		for i := range 100 {
			if !g.tryAcquire() {
				t.Fatalf("capacity %d refused acquire %d", capacity, i+1)
			}
		}
		if _, inFlight := g.state(); inFlight != 100 {
			t.Fatalf("capacity %d: in flight %d, want 100", capacity, inFlight)
		}
	}
}

// An adapter's error keeps the upstream's status and Retry-After on the
// wire: the edge decides failover and the client's status from them.
func TestRunErrorKeepsUpstreamStatusAndRetryAfter(t *testing.T) {
	err := &adapter.Error{Code: adapter.CodeUpstream, Message: "slow down", HTTPStatus: 429, RetryAfterSec: 7}
	re := toRunError(err, context.Background())
	if re.GetCode() != adapter.CodeUpstream || re.GetMessage() != "slow down" || re.GetHttpStatus() != 429 || re.GetRetryAfterSec() != 7 {
		t.Fatalf("run error %v, want code upstream, status 429, retry after 7", re)
	}
}

// A provider whose config changes (a new instance replacing the old) while
// a run holds its only slot still counts that run: the new instance's gate
// does not admit a second run past the capacity, and the old instance is
// closed only once its run has left.
func TestRefreshReplacedProviderKeepsCountingRunsInFlight(t *testing.T) {
	_, c, b, once := startHeldProvider(t)
	changed := holdPayload(true)
	changed.Adapters[len(changed.Adapters)-1].Category = "gpu"
	if r := refresh(t, c, changed); r.GetStatus() != iop.RefreshStatus_REFRESH_STATUS_APPLIED {
		t.Fatalf("refresh changing h: %v", r)
	}
	if closes, early := b.counts(); early != 0 {
		t.Fatalf("the replaced instance was closed with its run still inside (%d closes, %d early)", closes, early)
	}
	requireSecondRunRefused(t, c, b, once, "replaced")
}

// A removed provider with two runs inside is closed by the last of them
// to leave, not by the first.
func TestRefreshClosesRemovedAdapterAfterItsLastRun(t *testing.T) {
	b := &holdBackend{entered: make(chan string, 4), release: make(chan struct{})}
	a := NewAgent(map[string]adapter.Factory{"mock": mock.New, "hold": b.factory},
		adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	t.Cleanup(a.Close)
	two := holdPayload(true)
	two.Adapters[len(two.Adapters)-1].Capacity = 2
	c := startNode(t, startFakeEdge(t, two, nil), a)

	r1 := startHeldRun(t, c, b, "r1")
	r2 := startHeldRun(t, c, b, "r2")
	var once sync.Once
	defer once.Do(func() { close(b.release) })
	if r := refresh(t, c, holdPayload(false)); r.GetStatus() != iop.RefreshStatus_REFRESH_STATUS_APPLIED {
		t.Fatalf("refresh removing h: %v", r)
	}
	// r1 leaves (cancelled) while r2 is still inside.
	if err := r1.Send(&iop.Envelope{Body: &iop.Envelope_CancelRequest{CancelRequest: &iop.CancelRequest{Kind: iop.CancelKind_CANCEL_KIND_CANCEL_RUN, RunId: "r1"}}}); err != nil {
		t.Fatal(err)
	}
	if ev := terminal(readAll(t, r1)); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_CANCELLED {
		t.Fatalf("r1: terminal %v, want CANCELLED", ev)
	}
	if closes, early := b.counts(); closes != 0 || early != 0 {
		t.Fatalf("after the first run left: %d closes (%d with a run inside), want none while r2 is inside", closes, early)
	}
	once.Do(func() { close(b.release) })
	if ev := terminal(readAll(t, r2)); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_COMPLETE {
		t.Fatalf("r2: terminal %v, want COMPLETE", ev)
	}
	if closes, early := b.counts(); closes != 1 || early != 0 {
		t.Fatalf("after the last run left: %d closes (%d with a run inside), want exactly 1", closes, early)
	}
}
