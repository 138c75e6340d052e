package cluster

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// FlushDue warns only of the kinds whose warning is due: a kind warned of
// less than Every ago keeps its refusals held back, though another kind's
// are due (each kind is warned of at most once per Every).
func TestRefusalLogFlushDueWarnsOnlyTheKindsDue(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	log := zap.New(core)
	r := RefusalLog{Every: time.Minute}
	oom, ro := refusedBy("OOM command not allowed"), refusedBy("READONLY You can't write against a read only replica.")
	t0 := time.Now()
	r.Record(log, 1, oom, t0)
	r.Record(log, 1, oom, t0.Add(time.Second)) // held back, due at t0+1m
	r.Record(log, 1, ro, t0.Add(30*time.Second))
	r.Record(log, 1, ro, t0.Add(31*time.Second)) // held back, due at t0+1m30s
	r.FlushDue(log, t0.Add(time.Minute))
	warns := logs.All()
	if len(warns) != 3 || warns[2].ContextMap()["kind"] != "OOM" {
		t.Fatalf("warnings %v, want the two first ones, then OOM's held-back one alone", warns)
	}
	if due := r.Due(); !due.Equal(t0.Add(90 * time.Second)) {
		t.Fatalf("due at +%v, want READONLY's at +1m30s", due.Sub(t0))
	}
}
