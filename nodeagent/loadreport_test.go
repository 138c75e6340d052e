package nodeagent

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/mock"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// loadEdge is a fakeEdge that also takes load reports.
type loadEdge struct {
	*fakeEdge
	loads chan *iop.LoadReport
}

func (le *loadEdge) Load(_ *nodewire.Conn, r *iop.LoadReport) {
	select {
	case le.loads <- r:
	default: // the test has seen enough
	}
}

func startLoadEdge(t *testing.T, payload *iop.NodeConfigPayload) *loadEdge {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fe := &fakeEdge{addr: ln.Addr().String(), payload: payload, script: func(int) iop.RejectCode { return iop.RejectCode_REJECT_CODE_UNSPECIFIED },
		conns: make(chan *nodewire.Conn, 64), ready: map[*nodewire.Conn]bool{}}
	le := &loadEdge{fakeEdge: fe, loads: make(chan *iop.LoadReport, 64)}
	fe.srv = nodewire.NewServer(nodewire.ServerConfig{Handler: le, HandshakeTimeout: 5 * time.Second})
	done := make(chan struct{})
	// Owner: the test; stops at srv.Close in Cleanup.
	go func() { defer close(done); _ = fe.srv.Serve(ln) }()
	t.Cleanup(func() { _ = fe.srv.Close(); <-done })
	return le
}

// probedInstance is a mock instance whose health probe is counted and,
// with hang, answers only when its context ends.
type probedInstance struct {
	adapter.Instance
	probes *atomic.Int64
	hang   bool
}

func (p probedInstance) Health(ctx context.Context) adapter.Health {
	p.probes.Add(1)
	if p.hang {
		<-ctx.Done()
		return adapter.Health{Status: adapter.HealthUnknown}
	}
	return adapter.Health{Status: adapter.HealthOK, Running: 1}
}

func probedAgent(t *testing.T, probes *atomic.Int64, hang bool) *Agent {
	a := NewAgent(map[string]adapter.Factory{"mock": func(cfg *iop.AdapterConfig, env adapter.Env) (adapter.Instance, error) {
		in, err := mock.New(cfg, env)
		return probedInstance{Instance: in, probes: probes, hang: hang}, err
	}}, adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	t.Cleanup(a.Close)
	return a
}

func loadPayload(intervalMs uint32) *iop.NodeConfigPayload {
	p := mockPayload(1)
	p.Heartbeat.TimeoutMs = 30000
	p.Runtime = &iop.NodeRuntimeConfig{LoadReportIntervalMs: intervalMs}
	return p
}

// waitLoads waits for n load reports, failing after within.
func waitLoads(t *testing.T, le *loadEdge, n int, within time.Duration) []*iop.LoadReport {
	t.Helper()
	var out []*iop.LoadReport
	deadline := time.After(within)
	for len(out) < n {
		select {
		case r := <-le.loads:
			out = append(out, r)
		case <-deadline:
			t.Fatalf("%d load reports within %s, want %d", len(out), within, n)
		}
	}
	return out
}

// Load reports come every load_report_interval_ms, each with the
// backends' figures.
func TestLoadReportsEveryInterval(t *testing.T) {
	var probes atomic.Int64
	le := startLoadEdge(t, loadPayload(50))
	startNode(t, le.fakeEdge, probedAgent(t, &probes, false))
	// Six reports at 50 ms take a quarter second; the next interval of
	// loadIdleCheck would put the sixth past 25 s.
	rs := waitLoads(t, le, 6, 4*loadIdleCheck)
	if p := rs[5].GetProviders(); len(p) != 1 || p[0].GetProviderId() != "m" || p[0].GetRunning() != 1 {
		t.Fatalf("report %v: want provider m running 1", rs[5])
	}
}

// A backend whose health probe never answers costs a report at most its
// interval: reports keep coming.
func TestLoadReportsGoOnWhenProbeHangs(t *testing.T) {
	var probes atomic.Int64
	le := startLoadEdge(t, loadPayload(50))
	startNode(t, le.fakeEdge, probedAgent(t, &probes, true))
	waitLoads(t, le, 3, 20*time.Second)
}

// With no interval configured, no report is sampled nor sent; a refresh
// that sets one starts them.
func TestLoadReportsOffUntilRefreshSetsInterval(t *testing.T) {
	var probes atomic.Int64
	le := startLoadEdge(t, loadPayload(0))
	c := startNode(t, le.fakeEdge, probedAgent(t, &probes, false))
	// A command answered: the session has been up a round trip, and the
	// report loop (started with it) has had its first tick.
	command(t, c, CmdUsage)
	if n := probes.Load(); n != 0 {
		t.Fatalf("%d health probes with load reports off", n)
	}
	select {
	case r := <-le.loads:
		t.Fatalf("load report %v with reports off", r)
	default:
	}
	if r := refresh(t, c, loadPayload(50)); r.GetStatus() != iop.RefreshStatus_REFRESH_STATUS_APPLIED {
		t.Fatalf("refresh: %v", r)
	}
	waitLoads(t, le, 2, loadIdleCheck+20*time.Second)
}
