package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/mock"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// crowdedAgent is an agent whose one adapter, "c", is cr.
func crowdedAgent(t *testing.T, cr *crowded) *Agent {
	t.Helper()
	a := NewAgent(map[string]adapter.Factory{
		"crowded": func(cfg *iop.AdapterConfig, env adapter.Env) (adapter.Instance, error) {
			c := proto.Clone(cfg).(*iop.AdapterConfig)
			c.Type = "mock"
			in, err := mock.New(c, env)
			cr.Instance = in
			return cr, err
		},
	}, adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	t.Cleanup(a.Close)
	if st, err := a.Apply(&iop.NodeConfigPayload{Adapters: []*iop.AdapterConfig{{Name: "c", Type: "crowded", Capacity: 1}}}, true); err != nil {
		t.Fatalf("apply: %v %v", st, err)
	}
	return a
}

func commandPayload(t *testing.T, a *Agent, typ string) map[string]any {
	t.Helper()
	resp := a.Command(context.Background(), typ)
	if resp.GetError() != "" {
		t.Fatalf("command %s: %s", typ, resp.GetError())
	}
	var out map[string]any
	if err := json.Unmarshal(resp.GetPayloadJson(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The lists' bounds are inclusive: exactly maxCommandSessions sessions, or
// maxCommandModels models with ids of maxModelIDLen bytes, are answered
// whole and not marked cut short; one model left out is marked.
func TestCommandListsAtTheirBounds(t *testing.T) {
	cr := &crowded{}
	for i := range maxCommandSessions {
		cr.sessions = append(cr.sessions, adapter.SessionInfo{ID: fmt.Sprint(i), Adapter: "c"})
	}
	for i := range maxCommandModels {
		cr.models = append(cr.models, fmt.Sprintf("%0*d", maxModelIDLen, i))
	}
	a := crowdedAgent(t, cr)
	s := commandPayload(t, a, CmdSessions)
	if len(s["sessions"].([]any)) != maxCommandSessions || s["truncated"] != nil {
		t.Fatalf("sessions at the bound: %d listed, truncated %v", len(s["sessions"].([]any)), s["truncated"])
	}
	caps := commandPayload(t, a, CmdCapabilities)["adapters"].([]any)[0].(map[string]any)
	if len(caps["models"].([]any)) != maxCommandModels || caps["models_truncated"] != nil {
		t.Fatalf("models at the bound: %d listed, truncated %v", len(caps["models"].([]any)), caps["models_truncated"])
	}

	cr.models = []string{"m", strings.Repeat("x", maxModelIDLen+1)}
	caps = commandPayload(t, a, CmdCapabilities)["adapters"].([]any)[0].(map[string]any)
	if len(caps["models"].([]any)) != 1 || caps["models_truncated"] != true {
		t.Fatalf("one overlong id: %v listed, truncated %v", caps["models"], caps["models_truncated"])
	}
}

// A sessions answer cut short keeps the running sessions, then the most
// recently used: the one left out is the least recently used.
func TestSessionsCutShortKeepTheMostRecent(t *testing.T) {
	cr := &crowded{}
	for i := range maxCommandSessions + 1 {
		cr.sessions = append(cr.sessions, adapter.SessionInfo{ID: fmt.Sprint(i), Adapter: "c", LastUsedUnix: int64(1000 + i)})
	}
	cr.sessions[500].Running = 1
	a := crowdedAgent(t, cr)
	s := commandPayload(t, a, CmdSessions)
	list := s["sessions"].([]any)
	if s["truncated"] != true || s["total"].(float64) != maxCommandSessions+1 || len(list) != maxCommandSessions {
		t.Fatalf("%d listed, truncated %v, total %v", len(list), s["truncated"], s["total"])
	}
	ids := map[string]bool{}
	for _, x := range list {
		ids[x.(map[string]any)["id"].(string)] = true
	}
	if list[0].(map[string]any)["id"] != "500" || list[1].(map[string]any)["id"] != fmt.Sprint(maxCommandSessions) || ids["0"] {
		t.Fatalf("kept first %v then %v, the oldest kept %v: want the running one, then newest first, the oldest left out",
			list[0], list[1], ids["0"])
	}
}

// An unknown command answers its error and nothing else.
func TestUnknownCommandHasNoPayload(t *testing.T) {
	a := newTestAgent(t)
	resp := a.Command(context.Background(), "rm -rf")
	if resp.GetError() == "" || resp.GetPayloadJson() != nil {
		t.Fatalf("unknown command: error %q, payload %q", resp.GetError(), resp.GetPayloadJson())
	}
}

// stuckLister is a model list that answers only when its context ends.
type stuckLister struct{ adapter.Instance }

func (stuckLister) Models(ctx context.Context) ([]string, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A backend that never answers its model list cannot hold a command's
// answer past commandTimeout, whatever the caller's context.
func TestCommandBoundedWhenBackendHangs(t *testing.T) {
	t.Parallel()
	a := NewAgent(map[string]adapter.Factory{"mock": func(cfg *iop.AdapterConfig, env adapter.Env) (adapter.Instance, error) {
		in, err := mock.New(cfg, env)
		return stuckLister{in}, err
	}}, adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	t.Cleanup(a.Close)
	if _, err := a.Apply(mockPayload(1), true); err != nil {
		t.Fatal(err)
	}
	done := make(chan *iop.NodeCommandResponse, 1)
	go func() { done <- a.Command(context.Background(), CmdCapabilities) }()
	select {
	case resp := <-done:
		if !strings.Contains(string(resp.GetPayloadJson()), `"error":"timed out"`) {
			t.Fatalf("answer %s: want the adapter's list timed out", resp.GetPayloadJson())
		}
	case <-time.After(commandTimeout + 20*time.Second):
		t.Fatal("the capabilities command waits on a backend that never answers")
	}
}
