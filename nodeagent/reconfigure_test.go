package nodeagent

import (
	"context"
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
}

func (r *reconfInstance) Reconfigure(cfg *iop.AdapterConfig) error {
	r.reconfigured = append(r.reconfigured, cfg)
	return nil
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
	if s := a.Snapshots(context.Background()); s[0].GetCapacity() != 3 {
		t.Fatalf("capacity reported after reconfiguring: %d, want 3", s[0].GetCapacity())
	}
	for i := range 3 {
		if _, ok := a.admit("m"); !ok {
			t.Fatalf("admission %d of 3 refused after the capacity went 1 -> 3", i+1)
		}
	}
	if _, ok := a.admit("m"); ok {
		t.Fatal("a fourth admission passed a capacity of 3")
	}
}
