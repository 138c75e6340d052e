package dispatch

import (
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testredis"
)

// A failed batch whose only remembered entry is a lost fenced return
// (its unsure re-add ended when the return was fenced) arms the sweep
// that forgets it a TTL after its re-add, as unsure entries do: without
// it the entry stayed until a later batch or answered probe resent it.
func TestReturnerLostFenceAloneArmsTheSweep(t *testing.T) {
	rs := testredis.Start(t)
	_, st := lostFenceFixture(t, rs, "e1/lost")
	if len(st.unsure) != 0 || len(st.lost) != 1 {
		t.Fatalf("fixture: %d unsure, %d lost; want 0 and 1", len(st.unsure), len(st.lost))
	}
	if st.sweepAt.IsZero() || st.sweepAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("sweep at %v, want it armed within a TTL", st.sweepAt)
	}
}
