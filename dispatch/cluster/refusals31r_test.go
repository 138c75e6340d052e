package cluster

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A RefusalLog with Every set warns of a refusal of a kind Every after its
// last warning at once, not held back for RefusalLogEvery; one inside
// Every is held back, and is due Every after the warning.
func TestRefusalLogEveryIsItsInterval(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	r := RefusalLog{Every: time.Second}
	refused := errors.New("refused")
	t0 := time.Now()
	r.Record(log, 1, refused, t0)
	r.Record(log, 1, refused, t0.Add(2*time.Second))
	if n := logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 2 {
		t.Fatalf("%d warnings of two refusals Every and more apart, want 2", n)
	}
	r.Record(log, 1, refused, t0.Add(2500*time.Millisecond))
	if n := logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 2 {
		t.Fatalf("%d warnings after a refusal inside Every, want it held back (2)", n)
	}
	if due, want := r.Due(), t0.Add(3*time.Second); !due.Equal(want) {
		t.Fatalf("held-back refusal due at %v, want Every after the last warning (%v)", due, want)
	}
}
