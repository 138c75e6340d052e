package nodeagent

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/mock"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// stuckProbeInstance is a mock instance whose health probe signals probing
// and answers only when its context ends (a backend that does not answer).
type stuckProbeInstance struct {
	adapter.Instance
	probing chan struct{}
}

func (p stuckProbeInstance) Health(ctx context.Context) adapter.Health {
	select {
	case p.probing <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return adapter.Health{Status: adapter.HealthUnknown}
}

// A drain that begins while the load report loop samples a backend that
// does not answer is reported at once, not when the sample gives up (a
// whole report interval, here a minute): until then every edge keeps
// sending the node work it refuses.
func TestDrainReportedDuringStuckSample(t *testing.T) {
	probing := make(chan struct{}, 1)
	a := NewAgent(map[string]adapter.Factory{"mock": func(cfg *iop.AdapterConfig, env adapter.Env) (adapter.Instance, error) {
		in, err := mock.New(cfg, env)
		return stuckProbeInstance{Instance: in, probing: probing}, err
	}}, adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	t.Cleanup(a.Close)
	le := startLoadEdge(t, loadPayload(60000))
	startNode(t, le.fakeEdge, a)
	select {
	case <-probing: // the session's first sample is stuck for a minute
	case <-time.After(10 * time.Second):
		t.Fatal("no health probe")
	}
	if err := a.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := waitLoads(t, le, 1, 20*time.Second)[0]
	if len(r.GetProviders()) != 1 || r.GetProviders()[0].GetHealth() != iop.HealthState_HEALTH_STATE_DRAINING {
		t.Fatalf("first report after the drain began: %v", r)
	}
}

// With a long report interval, a draining node still repeats that it
// drains every drainReportEvery: a session that reconnects during the
// drain may send its first report before the edge takes reports from it,
// and the next must not be a whole interval (here a minute) away.
func TestDrainRepeatedWithinLongInterval(t *testing.T) {
	var runs atomic.Int64
	h := heldInstance{runs: &runs, started: make(chan struct{}, 4), release: make(chan struct{})}
	le := startLoadEdge(t, heldPayload())
	a := heldAgent(t, h)
	startNode(t, le.fakeEdge, a)
	waitLoads(t, le, 1, 10*time.Second) // the session's first report
	if err := a.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, r := range waitLoads(t, le, 3, 20*time.Second) {
		if len(r.GetProviders()) != 2 || r.GetProviders()[0].GetHealth() != iop.HealthState_HEALTH_STATE_DRAINING {
			t.Fatalf("report during the drain: %v", r)
		}
	}
}
