package nodeagent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A run's timeout_sec ends it with a TIMEOUT error, not with the adapter
// left to run on for as long as the backend takes.
func TestRunTimeoutEndsTheRun(t *testing.T) {
	a := fullAgent(t)
	c := startNode(t, slowMockEdge(t, 1), a)
	start := time.Now()
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		// 150 ms a word: 30 s unless the timeout ends it.
		RunId: "r1", Adapter: "slow", Operation: iop.RunOperation_RUN_OPERATION_CHAT, TimeoutSec: 1,
		Input: chatInput(strings.Repeat("w ", 200)),
	}}})
	ev := terminal(envs)
	if ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_ERROR || ev.GetError().GetCode() != adapter.CodeTimeout {
		t.Fatalf("terminal %v after %v, want a TIMEOUT error", ev, time.Since(start))
	}
	for _, u := range commandPayload(t, a, CmdUsage)["adapters"].([]any) {
		if u := u.(map[string]any); u["adapter"] == "slow" && (u["requests"] != 1.0 || u["errors"] != 1.0) {
			t.Fatalf("usage %v: want the timed-out run counted as 1 request, 1 error", u)
		}
	}
}

// A tunnel's timeout_sec ends it with a TIMEOUT error frame, however long
// the adapter would wait.
func TestTunnelTimeoutEndsTheTunnel(t *testing.T) {
	_, c := startScriptNode(t, func(ctx context.Context, _ adapter.TunnelSink) error {
		<-ctx.Done()
		return ctx.Err()
	})
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_ProviderTunnelRequest{ProviderTunnelRequest: &iop.ProviderTunnelRequest{
		RunId: "t1", Adapter: "s", Target: "m", Method: "POST", Path: "/chat/completions", TimeoutSec: 1, Body: []byte(`{}`),
	}}})
	if len(envs) == 0 {
		t.Fatal("tunnel ended without a frame")
	}
	if f := envs[len(envs)-1].GetProviderTunnelFrame(); f.GetKind() != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_ERROR || f.GetError().GetCode() != adapter.CodeTimeout {
		t.Fatalf("last frame %v, want a TIMEOUT error", f)
	}
}

// runScript is a mock instance whose Run is the test's script.
type runScript struct {
	adapter.Instance
	run func(sink adapter.RunSink) (*adapter.Result, error)
}

func (s *runScript) Run(_ context.Context, _ *iop.RunRequest, sink adapter.RunSink) (*adapter.Result, error) {
	return s.run(sink)
}

// An adapter's empty delta is not sent (the edge would relay an empty
// chunk), and a result with no finish reason completes as "stop".
func TestRunSkipsEmptyDeltaAndDefaultsFinishReason(t *testing.T) {
	_, c := startWrappedMockNode(t, "s", func(in adapter.Instance) adapter.Instance {
		return &runScript{Instance: in, run: func(sink adapter.RunSink) (*adapter.Result, error) {
			if err := sink.Delta(""); err != nil {
				return nil, err
			}
			if err := sink.Delta("x"); err != nil {
				return nil, err
			}
			return &adapter.Result{}, nil
		}}
	})
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		RunId: "r1", Adapter: "s", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Stream: true, Input: chatInput("a"),
	}}})
	var types []iop.RunEventType
	for _, env := range envs {
		types = append(types, env.GetRunEvent().GetType())
	}
	if len(envs) != 3 || envs[1].GetRunEvent().GetDelta() != "x" {
		t.Fatalf("events %v, want START, one DELTA \"x\", COMPLETE", types)
	}
	if ev := terminal(envs); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_COMPLETE || ev.GetFinishReason() != "stop" || ev.GetSequence() != 3 {
		t.Fatalf("terminal %v, want COMPLETE as 3 with finish reason stop", ev)
	}
}

// Runs without an id are not tracked by id, so a second beside the first
// runs: an empty id is not one "in use".
func TestRunsWithoutIDRunSideBySide(t *testing.T) {
	c := startNode(t, slowMockEdge(t, 2), fullAgent(t))
	first, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Send(&iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		Adapter: "slow", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Stream: true, Input: chatInput(strings.Repeat("w ", 200)),
	}}}); err != nil {
		t.Fatal(err)
	}
	_ = first.SetReadDeadline(time.Now().Add(30 * time.Second))
	if env, err := first.Recv(); err != nil || env.GetRunEvent().GetType() != iop.RunEventType_RUN_EVENT_TYPE_START {
		t.Fatalf("first event %v, %v", env, err)
	}
	// The first is inside the adapter (START is sent after tracking).
	envs := exchange(t, c, &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{
		Adapter: "slow", Operation: iop.RunOperation_RUN_OPERATION_CHAT, Input: chatInput("c"),
	}}})
	if ev := terminal(envs); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_COMPLETE {
		t.Fatalf("second run without an id ended %v, want COMPLETE", ev)
	}
	// The first (30 s of words) is cancelled on its own stream.
	if err := first.Send(&iop.Envelope{Body: &iop.Envelope_CancelRequest{CancelRequest: &iop.CancelRequest{Kind: iop.CancelKind_CANCEL_KIND_CANCEL_RUN}}}); err != nil {
		t.Fatal(err)
	}
	if ev := terminal(readAll(t, first)); ev.GetType() != iop.RunEventType_RUN_EVENT_TYPE_CANCELLED {
		t.Fatalf("first run without an id ended %v, want CANCELLED", ev)
	}
}
