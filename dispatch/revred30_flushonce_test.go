package dispatch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testredis"
)

// The shutdown flush sends each lost fenced return once: a flush that
// sent them again with every batch would spend its whole CloseFlush
// bound repeating them (Close held up, Redis hammered).
func TestClusterShutdownFlushSendsALostFenceOnce(t *testing.T) {
	rs := testredis.Start(t)
	const id = "e1/lost"
	f, st := lostFenceFixture(t, rs, id)
	ctx := context.Background()
	rdb := rs.Client(t)
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	f.d.flushReturnsLost(nil, st.unsure, st.lost, time.Minute)
	stats, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var evals string
	for _, line := range strings.Split(stats, "\n") {
		if strings.HasPrefix(line, "cmdstat_eval:") {
			evals = strings.TrimSpace(line)
		}
	}
	if !strings.HasPrefix(evals, "cmdstat_eval:calls=1,") {
		t.Fatalf("the flush ran %q, want the one fenced return's script once", evals)
	}
}
