package nodeagent

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func slowMockEdge(t *testing.T, capacity int32) *fakeEdge {
	payload := &iop.NodeConfigPayload{
		Adapters:  []*iop.AdapterConfig{{Name: "slow", Type: "mock", Capacity: capacity, Settings: map[string]string{"delay_ms": "150"}}},
		Heartbeat: &iop.HeartbeatConfig{IntervalMs: 50, TimeoutMs: 2000},
	}
	return startFakeEdge(t, payload, nil)
}

// The Edge closing its side before the terminal message (it gave up on the
// run) cancels the run.
func TestEdgeClosingItsSideCancelsTheRun(t *testing.T) {
	c := startNode(t, slowMockEdge(t, 1), fullAgent(t))
	st, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Send(&iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		RunId: "r1", Adapter: "slow", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Stream: true, Input: chatInput("a b c d e f g h i j k l m n o p"),
	}}})
	_ = st.SetReadDeadline(time.Now().Add(10 * time.Second))
	var last iop.RunEventType
	deltas := 0
	for {
		env, err := st.Recv()
		if err != nil {
			break
		}
		last = env.GetRunEvent().GetType()
		if last == iop.RunEventType_RUN_EVENT_TYPE_DELTA {
			if deltas++; deltas == 1 {
				_ = st.CloseWrite()
			}
		}
	}
	if last != iop.RunEventType_RUN_EVENT_TYPE_CANCELLED || deltas > 8 {
		t.Fatalf("last event %v after %d deltas: want CANCELLED soon after the Edge closed its side", last, deltas)
	}
}

// While held runs are quiet (nothing arrives from the Edge), no goroutine
// sits reading their streams for a cancel; a cancel still arrives.
func TestQuietRunsParkNoCancelReader(t *testing.T) {
	const runs = 4
	c := startNode(t, slowMockEdge(t, runs), fullAgent(t))
	// readersIn counts goroutines waiting in Stream.Recv (the control
	// streams' readers, on both sides, are there from the start).
	readersIn := func() int {
		buf := make([]byte, 1<<20)
		return strings.Count(string(buf[:runtime.Stack(buf, true)]), "nodewire.(*Stream).Recv(")
	}
	time.Sleep(100 * time.Millisecond) // let the connection settle
	readers := readersIn()
	var open []*nodewire.Stream
	for i := range runs {
		st, err := c.OpenStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_ = st.Send(&iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
			RunId: fmt.Sprintf("r%d", i), Adapter: "slow", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Stream: true, Input: chatInput(strings.Repeat("w ", 40)),
		}}})
		_ = st.SetReadDeadline(time.Now().Add(10 * time.Second))
		if env, err := st.Recv(); err != nil || env.GetRunEvent().GetType() != iop.RunEventType_RUN_EVENT_TYPE_START {
			t.Fatalf("run %d: first event %v, %v", i, env, err)
		}
		open = append(open, st)
	}
	if n := readersIn(); n != readers {
		t.Fatalf("%d goroutines wait in Stream.Recv with %d quiet runs held, %d before: want no reader per quiet run", n, runs, readers)
	}
	// A cancel on a quiet stream is still seen.
	st := open[0]
	_ = st.Send(&iop.Envelope{Body: &iop.Envelope_CancelRequest{CancelRequest: &iop.CancelRequest{Kind: iop.CancelKind_CANCEL_KIND_CANCEL_RUN, RunId: "r0"}}})
	var last iop.RunEventType
	for {
		env, err := st.Recv()
		if err != nil {
			break
		}
		last = env.GetRunEvent().GetType()
	}
	if last != iop.RunEventType_RUN_EVENT_TYPE_CANCELLED {
		t.Fatalf("last event after cancel: %v, want CANCELLED", last)
	}
	for _, s := range open {
		_ = s.CloseWrite()
	}
}

// deafInstance is a mock instance whose Run sends deltas until one fails,
// never looking at its context: only a failed send stops it.
type deafInstance struct {
	adapter.Instance
	reached chan struct{} // closed as the 30th Delta call begins
}

func (d *deafInstance) Run(_ context.Context, _ *iop.RunRequest, sink adapter.RunSink) (*adapter.Result, error) {
	word := strings.Repeat("x", 8<<10)
	// 4 MiB of deltas at most: far more than the stream's window holds.
	for i := 1; i <= 512; i++ {
		if i == 30 {
			close(d.reached)
		}
		if err := sink.Delta(word); err != nil {
			return nil, err
		}
	}
	return &adapter.Result{}, nil
}

// A cancelled run whose Edge has stopped reading its stream (the window is
// full, the adapter's next delta blocked on it) still ends and frees its
// slot, within cancelSendGrace: no wait on the Edge's reading. The adapter
// ignores its context, so only the bound on its blocked send ends it.
func TestCancelFreesSlotWhenEdgeStopsReading(t *testing.T) {
	reached := make(chan struct{})
	// The session outlasts a loaded machine's stalls (a generous
	// heartbeat): what is measured here is the run's slot.
	agent, c := startWrappedMockNode(t, "m", func(in adapter.Instance) adapter.Instance {
		return &deafInstance{Instance: in, reached: reached}
	})
	inFlight := func() int32 { return agent.Snapshots(context.Background())[0].GetInFlight() }
	st, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Abort()
	if err := st.Send(&iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		RunId: "r1", Adapter: "m", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Stream: true, Input: chatInput("hi"),
	}}}); err != nil {
		t.Fatal(err)
	}
	// The Edge reads nothing. 29 deltas of 8 KiB fit the stream's 256 KiB
	// window, so the 30th delta begins; the 32nd cannot complete.
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the run never began its 30th delta")
	}
	if err := st.Send(&iop.Envelope{Body: &iop.Envelope_CancelRequest{CancelRequest: &iop.CancelRequest{
		Kind: iop.CancelKind_CANCEL_KIND_CANCEL_RUN, RunId: "r1"}}}); err != nil {
		t.Fatal(err)
	}
	cancelled := time.Now()
	for inFlight() != 0 {
		if time.Since(cancelled) > cancelSendGrace+5*time.Second {
			t.Fatalf("the cancelled run still holds its slot %s after the cancel (the Edge not reading)", time.Since(cancelled).Round(time.Second))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A cancel that arrives with the run request (one write, so the node
// finds it already there when it starts watching) still cancels the run.
func TestCancelArrivingWithTheRequestCancelsTheRun(t *testing.T) {
	c := startNode(t, slowMockEdge(t, 1), fullAgent(t))
	st, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Queue(&iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		RunId: "r1", Adapter: "slow", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Stream: true, Input: chatInput(strings.Repeat("w ", 100)),
	}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&iop.Envelope{Body: &iop.Envelope_CancelRequest{CancelRequest: &iop.CancelRequest{
		Kind: iop.CancelKind_CANCEL_KIND_CANCEL_RUN, RunId: "r1"}}}); err != nil {
		t.Fatal(err)
	}
	if ev := terminal(readAll(t, st)); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_CANCELLED {
		t.Fatalf("terminal %v, want CANCELLED", ev)
	}
}
