package nodeagent

import (
	"context"
	"sync"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A refresh that reconfigures an instance in place (same type) while the
// Edge runs commands (usage, capabilities, providers) reads and writes the
// instance's config without a race (run with -race).
func TestRefreshDuringCommands(t *testing.T) {
	a := fullAgent(t)
	cfg := func(url string) *iop.NodeConfigPayload {
		return &iop.NodeConfigPayload{Adapters: []*iop.AdapterConfig{{Name: "oa", Type: "openai_compat", Capacity: 1, BaseUrl: url}}}
	}
	if st, err := a.Apply(cfg("http://127.0.0.1:1/a"), true); err != nil {
		t.Fatalf("apply: %v %v", st, err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // Owner: this test; 200 refreshes.
		defer wg.Done()
		for i := 0; i < 200; i++ {
			url := "http://127.0.0.1:1/a"
			if i%2 == 1 {
				url = "http://127.0.0.1:1/b"
			}
			if _, err := a.Apply(cfg(url), false); err != nil {
				t.Errorf("apply: %v", err)
				return
			}
		}
	}()
	go func() { // Owner: this test; 200 commands.
		defer wg.Done()
		for i := 0; i < 200; i++ {
			_ = a.Command(context.Background(), CmdUsage)
			_ = a.Snapshots(context.Background())
		}
	}()
	wg.Wait()
}
