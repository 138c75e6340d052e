package nodeagent

import (
	"context"
	"errors"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/mock"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// reconfInstance is a mock instance that takes a changed config in place
// (as the CLI adapters do, to keep their sessions).
type reconfInstance struct {
	adapter.Instance
	reconfigured []*iop.AdapterConfig
	refuse       error // what Reconfigure answers
	closed       bool
}

func (r *reconfInstance) Reconfigure(cfg *iop.AdapterConfig) error {
	if r.refuse != nil {
		return r.refuse
	}
	r.reconfigured = append(r.reconfigured, cfg)
	return nil
}

func (r *reconfInstance) Close() error {
	r.closed = true
	return r.Instance.Close()
}

// A provider reconfigured in place keeps its instance and takes the new
// capacity: its gate admits up to the new bound, and reports it.
func TestReconfiguredInPlaceTakesNewCapacity(t *testing.T) {
	var built []*reconfInstance
	factory := func(cfg *iop.AdapterConfig, env adapter.Env) (adapter.Instance, error) {
		in, err := mock.New(cfg, env)
		if err != nil {
			return nil, err
		}
		r := &reconfInstance{Instance: in}
		built = append(built, r)
		return r, nil
	}
	a := NewAgent(map[string]adapter.Factory{"mock": factory}, adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	t.Cleanup(a.Close)
	if st, err := a.Apply(mockPayload(1), true); st != iop.RefreshStatus_REFRESH_STATUS_APPLIED {
		t.Fatalf("initial apply: %v %v", st, err)
	}
	first := a.instances["m"]
	if st, err := a.Apply(mockPayload(3), false); st != iop.RefreshStatus_REFRESH_STATUS_APPLIED {
		t.Fatalf("refresh: %v %v", st, err)
	}
	if a.instances["m"] != first || len(built[0].reconfigured) != 1 || built[0].reconfigured[0].GetCapacity() != 3 {
		t.Fatalf("the instance was not reconfigured in place (%d built)", len(built))
	}
	// The instance built only to validate the new config is closed.
	if len(built) != 2 || !built[1].closed || built[0].closed {
		t.Fatalf("%d instances built; the validating one closed %v, the live one closed %v", len(built), len(built) > 1 && built[1].closed, built[0].closed)
	}
	if s := a.Snapshots(context.Background()); s[0].GetCapacity() != 3 {
		t.Fatalf("capacity reported after reconfiguring: %d, want 3", s[0].GetCapacity())
	}
	for i := range 3 {
		if _, err := a.admit("m"); err != nil {
			t.Fatalf("admission %d of 3 refused after the capacity went 1 -> 3", i+1)
		}
	}
	if _, err := a.admit("m"); !errors.Is(err, errAtCapacity) {
		t.Fatal("a fourth admission passed a capacity of 3")
	}

	// A reconfiguration the instance refuses fails the refresh, which
	// changes nothing.
	built[0].refuse = errors.New("cannot")
	if st, err := a.Apply(mockPayload(5), false); st != iop.RefreshStatus_REFRESH_STATUS_FAILED || err == nil {
		t.Fatalf("refused reconfiguration: %v %v, want FAILED", st, err)
	}
	if s := a.Snapshots(context.Background()); s[0].GetCapacity() != 3 {
		t.Fatalf("capacity after a refused reconfiguration: %d, want 3", s[0].GetCapacity())
	}
}

// Closing the agent closes its instances.
func TestAgentCloseClosesInstances(t *testing.T) {
	var built []*reconfInstance
	a := NewAgent(map[string]adapter.Factory{"mock": func(cfg *iop.AdapterConfig, env adapter.Env) (adapter.Instance, error) {
		in, err := mock.New(cfg, env)
		r := &reconfInstance{Instance: in}
		built = append(built, r)
		return r, err
	}}, adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	if _, err := a.Apply(mockPayload(1), true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if len(built) != 1 || !built[0].closed {
		t.Fatal("the agent closed without closing its instance")
	}
}

// A refresh that fails closes every instance it built for it: none is
// left open behind a config that was not applied.
func TestFailedRefreshClosesWhatItBuilt(t *testing.T) {
	var built []*reconfInstance
	a := NewAgent(map[string]adapter.Factory{"mock": func(cfg *iop.AdapterConfig, env adapter.Env) (adapter.Instance, error) {
		in, err := mock.New(cfg, env)
		r := &reconfInstance{Instance: in}
		built = append(built, r)
		return r, err
	}}, adapter.Env{StoreDir: t.TempDir(), WorkspaceRoot: t.TempDir()})
	t.Cleanup(a.Close)
	if _, err := a.Apply(mockPayload(1), true); err != nil {
		t.Fatal(err)
	}
	built[0].refuse = errors.New("cannot")
	p := mockPayload(2) // m changes, and is refused
	p.Adapters = append(p.Adapters, &iop.AdapterConfig{Name: "n", Type: "mock", Capacity: 1})
	if st, _ := a.Apply(p, false); st != iop.RefreshStatus_REFRESH_STATUS_FAILED {
		t.Fatalf("refresh: %v, want FAILED", st)
	}
	for i, b := range built[1:] {
		if !b.closed {
			t.Fatalf("instance %d built for the failed refresh left open", i+1)
		}
	}
	if built[0].closed || len(a.Capabilities()) != 1 {
		t.Fatal("the failed refresh changed the live adapters")
	}
}
