package nodeagent

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/mock"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// holdBackend is a backend whose runs wait until released; it records
// which of its instances were closed while a run was still inside them.
type holdBackend struct {
	entered chan string   // a run's id, once its Run was called
	release chan struct{} // closed: every run completes

	mu     sync.Mutex
	closes int // guarded by mu: instances closed
	early  int // guarded by mu: of those, closed with a run inside
}

type holdInstance struct {
	adapter.Instance // mock: Tunnel and the rest
	b                *holdBackend
	running          atomic.Int32
}

func (h *holdInstance) Run(ctx context.Context, req *iop.RunRequest, _ adapter.RunSink) (*adapter.Result, error) {
	h.running.Add(1)
	defer h.running.Add(-1)
	h.b.entered <- req.GetRunId()
	select {
	case <-h.b.release:
		return &adapter.Result{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (h *holdInstance) Close() error {
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	h.b.closes++
	if h.running.Load() > 0 {
		h.b.early++
	}
	return nil
}

func (b *holdBackend) counts() (closes, early int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closes, b.early
}

func (b *holdBackend) factory(cfg *iop.AdapterConfig, env adapter.Env) (adapter.Instance, error) {
	c := proto.Clone(cfg).(*iop.AdapterConfig)
	c.Type = "mock"
	in, err := mock.New(c, env)
	if err != nil {
		return nil, err
	}
	return &holdInstance{Instance: in, b: b}, nil
}

func holdPayload(withHold bool) *iop.NodeConfigPayload {
	p := mockPayload(1)
	if withHold {
		p.Adapters = append(p.Adapters, &iop.AdapterConfig{Name: "h", Type: "hold", Category: "api", Capacity: 1})
	}
	return p
}

// startHeldRun opens a run on adapter h and waits until the adapter has it.
func startHeldRun(t *testing.T, c *nodewire.Conn, b *holdBackend, runID string) *nodewire.Stream {
	t.Helper()
	st, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		RunId: runID, Adapter: "h", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Input: chatInput("hi"),
	}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-b.entered:
		if id != runID {
			t.Fatalf("adapter got run %q, want %q", id, runID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run never reached the adapter")
	}
	return st
}

// readAll reads a run's events until the node closes the stream.
func readAll(t *testing.T, st *nodewire.Stream) []*iop.Envelope {
	t.Helper()
	// Generous: a run that read and rejected an answer over the wire's
	// default 16 MiB frame bound took 15 s under -race on a loaded 2-core
	// machine; a passing run never comes near it.
	_ = st.SetReadDeadline(time.Now().Add(45 * time.Second))
	var out []*iop.Envelope
	for {
		env, err := st.Recv()
		if err != nil {
			break
		}
		out = append(out, env)
	}
	_ = st.CloseWrite()
	return out
}

// A refresh that removes a provider while a run is inside it closes the
// adapter instance only after that run has ended, and closes it then.
func TestRefreshClosesRemovedAdapterAfterItsRuns(t *testing.T) {
	b := &holdBackend{entered: make(chan string, 4), release: make(chan struct{})}
	a := NewAgent(map[string]adapter.Factory{"mock": mock.New, "hold": b.factory},
		adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	t.Cleanup(a.Close)
	c := startNode(t, startFakeEdge(t, holdPayload(true), nil), a)

	st := startHeldRun(t, c, b, "r1")
	if r := refresh(t, c, holdPayload(false)); r.GetStatus() != iop.RefreshStatus_REFRESH_STATUS_APPLIED {
		t.Fatalf("refresh removing h: %v", r)
	}
	if closes, early := b.counts(); early != 0 {
		t.Fatalf("the removed adapter was closed with its run still inside (%d closes, %d early)", closes, early)
	}
	close(b.release)
	if ev := terminal(readAll(t, st)); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_COMPLETE {
		t.Fatalf("the run on the removed adapter: terminal %v, want COMPLETE", ev)
	}
	// The node closes the instance once the run has left it (before its
	// terminal event, with the slot).
	if closes, early := b.counts(); closes != 1 || early != 0 {
		t.Fatalf("after the run ended: %d closes (%d with a run inside), want exactly 1 after the run", closes, early)
	}
}

// A provider removed while a run holds its only slot and added back before
// that run ends still counts the run: the node's gate does not admit a
// second run past the capacity.
func TestRefreshReAddedProviderKeepsCountingRunsInFlight(t *testing.T) {
	a, c, b, once := startHeldProvider(t)
	if r := refresh(t, c, holdPayload(false)); r.GetStatus() != iop.RefreshStatus_REFRESH_STATUS_APPLIED {
		t.Fatalf("refresh removing h: %v", r)
	}
	if r := refresh(t, c, holdPayload(true)); r.GetStatus() != iop.RefreshStatus_REFRESH_STATUS_APPLIED {
		t.Fatalf("refresh adding h back: %v", r)
	}
	if snaps := a.Snapshots(context.Background()); snaps[0].GetProviderId() != "h" || snaps[0].GetInFlight() != 1 {
		t.Errorf("h after coming back: %v, want in_flight 1", snaps[0])
	}
	requireSecondRunRefused(t, c, b, once, "re-added")
}

// requireSecondRunRefused opens a second run r2 on provider h, whose one
// slot r1 still holds (blocked in b), and fails unless the node refuses
// it with capacity_exceeded; what names h's state in the messages.
func requireSecondRunRefused(t *testing.T, c *nodewire.Conn, b *holdBackend, once *sync.Once, what string) {
	t.Helper()
	second, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Send(&iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		RunId: "r2", Adapter: "h", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Input: chatInput("hi"),
	}}}); err != nil {
		t.Fatal(err)
	}
	answered := make(chan []*iop.Envelope, 1)
	// Owner: this test; ends when the node closes r2's stream (at once
	// when refused; once released when admitted).
	go func() { answered <- readAll(t, second) }()
	select {
	case id := <-b.entered:
		once.Do(func() { close(b.release) })
		<-answered
		t.Fatalf("run %q was admitted to the %s provider of capacity 1 while r1 still held its slot", id, what)
	case envs := <-answered:
		if ev := terminal(envs); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_ERROR || ev.GetError().GetCode() != adapter.CodeCapacityExceeded {
			t.Fatalf("second run on the %s provider of capacity 1: terminal %v, want capacity_exceeded", what, ev)
		}
	}
}

// startHeldProvider starts a node whose provider h (capacity 1) holds run
// r1 inside b until once releases it; the run is released and read to its
// end when the test ends.
func startHeldProvider(t *testing.T) (*Agent, *nodewire.Conn, *holdBackend, *sync.Once) {
	t.Helper()
	b := &holdBackend{entered: make(chan string, 4), release: make(chan struct{})}
	a := NewAgent(map[string]adapter.Factory{"mock": mock.New, "hold": b.factory},
		adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	t.Cleanup(a.Close)
	c := startNode(t, startFakeEdge(t, holdPayload(true), nil), a)
	st := startHeldRun(t, c, b, "r1")
	once := new(sync.Once)
	// Cleanups run last first: r1 is released, then read to its end.
	t.Cleanup(func() { readAll(t, st) })
	t.Cleanup(func() { once.Do(func() { close(b.release) }) })
	return a, c, b, once
}
