package nodeagent

import (
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A config naming one adapter twice, or giving one a negative capacity,
// is refused whole: nothing of it is applied.
func TestApplyRefusesDuplicateNameAndNegativeCapacity(t *testing.T) {
	for name, mutate := range map[string]func(p *iop.NodeConfigPayload){
		"duplicate name":    func(p *iop.NodeConfigPayload) { p.Adapters = append(p.Adapters, p.Adapters[0]) },
		"negative capacity": func(p *iop.NodeConfigPayload) { p.Adapters[0].Capacity = -1 },
	} {
		t.Run(name, func(t *testing.T) {
			a := newTestAgent(t)
			p := mockPayload(2)
			mutate(p)
			if st, err := a.Apply(p, true); st != iop.RefreshStatus_REFRESH_STATUS_FAILED || err == nil {
				t.Fatalf("apply: %v %v, want FAILED", st, err)
			}
			if n := len(a.Capabilities()); n != 0 {
				t.Fatalf("%d adapters live after a refused config", n)
			}
		})
	}
}
