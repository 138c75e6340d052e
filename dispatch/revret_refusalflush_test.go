package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
)

// The refusals the returner held back (within cluster.RefusalLogEvery of
// their kind's warning) are warned of by its timer once that time has
// passed, though no refusal follows. The old code told them only at
// debug level, unless another refusal of the kind came a minute later.
func TestReturnerWarnsOfHeldBackRefusalsOnItsTimer(t *testing.T) {
	f, logs := observedLedger(t, deadAddr(t))
	st := newReturnerState()
	defer st.timer.Stop()
	refused := errors.New("refused")
	warned := time.Now().Add(-2 * cluster.RefusalLogEvery)
	st.refused.Record(f.d.log, 1, refused, warned)
	st.refused.Record(f.d.log, 2, refused, warned.Add(time.Second))
	st.arm()
	if want := warned.Add(cluster.RefusalLogEvery); !st.timerAt.Equal(want) {
		t.Fatalf("timer at %v, want when the held-back refusal is due (%v)", st.timerAt, want)
	}
	st.timerAt = time.Time{} // the timer fired
	f.d.returnerTick(st, time.Minute)
	warns := refusalWarnings(logs)
	if len(warns) != 2 {
		t.Fatalf("%d refusal warnings, want 2 (the first, then the held-back one)", len(warns))
	}
	if n := warns[1].ContextMap()["updates"]; n != int64(2) {
		t.Fatalf("held-back warning counts %v updates, want 2", n)
	}
	if !st.timerAt.IsZero() {
		t.Fatalf("timer armed at %v with nothing left to do", st.timerAt)
	}
}

// A refusal held back when the edge stops is warned of at shutdown.
func TestClusterReturnerWarnsOfHeldBackRefusalsAtClose(t *testing.T) {
	rs := testredis.Start(t)
	core, logs := observer.New(zapcore.DebugLevel)
	f := closedLedgerFixture(t, oneProviderCfg(t, 2),
		cluster.Config{Address: rs.Addr, TTL: time.Minute, Timeout: 2 * time.Second, EdgeID: "e1"},
		Options{Logger: zap.New(core)})
	f.up("n")
	a := mustAcquire(t, f.d, Request{Model: "m"})
	b := mustAcquire(t, f.d, Request{Model: "m"})
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	if err := rdb.Set(context.Background(), cluster.Key("n", "p"), "someone else's", 0).Err(); err != nil {
		t.Fatal(err)
	}
	a.Release(ReasonCompleted)
	waitFor(t, "the refusal's warning", func() bool { return len(refusalWarnings(logs)) == 1 })
	b.Release(ReasonCompleted)
	waitFor(t, "the second refusal", func() bool {
		return logs.FilterMessageSnippet("cluster ledger refused updates").Len() == 2
	})
	f.d.Close()
	if n := len(refusalWarnings(logs)); n != 2 {
		t.Fatalf("%d refusal warnings after Close, want 2 (the held-back one at shutdown)", n)
	}
}
