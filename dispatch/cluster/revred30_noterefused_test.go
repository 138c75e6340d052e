package cluster

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Refused takes held back after their kind's warning are warned of by
// FlushRefusals once RefusalLogEvery has passed since that warning (not
// before, not a minute later), each counted as one update, under the
// take's own message; FlushAllRefusals tells them at once, due or not.
func TestNoteRefusedHeldBackAreFlushedWhenDue(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	l := Open(Config{Address: "127.0.0.1:1", TTL: time.Minute, Timeout: time.Second, EdgeID: "e"})
	defer l.Close()
	err := revretReply("READONLY You can't write against a read only replica.")
	t0 := time.Now()
	for range 3 {
		l.NoteRefused(log, RefusedTake, err)
	}
	warns := func() []observer.LoggedEntry {
		return logs.FilterMessage(refusedMsgs[RefusedTake]).FilterLevelExact(zapcore.WarnLevel).All()
	}
	if n := len(warns()); n != 1 {
		t.Fatalf("%d warnings of three refused takes, want 1", n)
	}
	l.FlushRefusals(log, t0.Add(RefusalLogEvery/2))
	if n := len(warns()); n != 1 {
		t.Fatalf("%d warnings after a flush before the minute, want 1", n)
	}
	// Due RefusalLogEvery after the warning, which came after t0.
	l.FlushRefusals(log, time.Now().Add(RefusalLogEvery))
	w := warns()
	if len(w) != 2 {
		t.Fatalf("%d warnings after the flush due, want 2", len(w))
	}
	if c := w[1].ContextMap(); c["batches"] != int64(2) || c["updates"] != int64(2) || c["kind"] != "READONLY" {
		t.Fatalf("the flush warned %v, want 2 batches of 1 update of kind READONLY", c)
	}
	l.NoteRefused(log, RefusedRenew, err)
	l.NoteRefused(log, RefusedRenew, err)
	l.FlushAllRefusals(log)
	r := logs.FilterMessage(refusedMsgs[RefusedRenew]).FilterLevelExact(zapcore.WarnLevel).All()
	if len(r) != 2 || r[1].ContextMap()["batches"] != int64(1) {
		t.Fatalf("FlushAllRefusals: renewal warnings %v, want the first and one of the refusal held back", r)
	}
}
