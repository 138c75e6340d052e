package stack

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/internal/testproc"
)

// A cli route runs in workspace_root/<the model's workspace> (CONTRACT §3
// models[].workspace, §5 "runs in workspace_root/<model workspace>"): the
// edge puts the model's workspace in RunRequest.workspace and the node runs
// the command there. Two models on one provider, one with a workspace and
// one without, answer with the directory the command ran in.
func TestCLIRouteRunsInTheModelsWorkspace(t *testing.T) {
	testproc.Shell(t)
	cfg := &config.Edge{
		Nodes: []config.NodeSpec{{ID: "a", Token: "tok-a", Providers: []config.ProviderSpec{{
			Name: "agent", Type: "cli", Capacity: 2,
			Command: []string{"sh", "-c", "cat >/dev/null; pwd -P"},
		}}}},
		Models: []config.ModelSpec{
			{Name: "proj", Workspace: "team/proj", Providers: []config.ModelProvider{{Node: "a", Provider: "agent", Target: "default"}}},
			{Name: "bare", Providers: []config.ModelProvider{{Node: "a", Provider: "agent", Target: "default"}}},
		},
	}
	root := t.TempDir()
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	e := StartEdge(t, cfg, EdgeOptions{})
	StartNode(t, e.NodeAddr, "a", NodeOptions{Token: "tok-a", Workspace: root})
	e.WaitReady(t, "a", 10*time.Second)

	for model, want := range map[string]string{
		"proj": filepath.Join(realRoot, "team", "proj"),
		"bare": realRoot,
	} {
		resp, err := http.Post(e.URL+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"where"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", model, resp.StatusCode, b)
		}
		var out struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) != 1 {
			t.Fatalf("%s: %v %s", model, err, b)
		}
		if got := strings.TrimSpace(out.Choices[0].Message.Content); got != want {
			t.Errorf("%s ran in %q, want %q", model, got, want)
		}
	}
}
