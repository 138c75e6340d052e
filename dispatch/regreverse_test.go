package dispatch

import (
	"testing"

	"github.com/iop-gateway/iop/nodewire"
)

// Each accepted registration is stamped, in the step that makes it the
// owner, with an order that grows with every registration: the server keeps
// the newest of two connections waiting for their ready by it, whatever
// order their answers' writes end in. A rejected one is not stamped.
func TestRegisterStampsGrowingOrder(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	older := f.register("n1")
	newer := f.register("n1")
	if o, n := older.RegisterOrder(), newer.RegisterOrder(); o == 0 || n <= o {
		t.Fatalf("registration orders %d then %d, want growing and non-zero", o, n)
	}
	// The order is the owner's generation: fencing and the server agree.
	f.d.mu.Lock()
	gen := f.d.nodes["n1"].gen
	f.d.mu.Unlock()
	if newer.RegisterOrder() != gen {
		t.Fatalf("registration order %d, owner generation %d", newer.RegisterOrder(), gen)
	}
	bad := new(nodewire.Conn)
	if resp := f.d.Register(bad, regReq("n1", "wrong-token")); resp.GetAccepted() {
		t.Fatal("a wrong token was accepted")
	}
	if bad.RegisterOrder() != 0 {
		t.Fatalf("a rejected registration was stamped %d", bad.RegisterOrder())
	}
}
