package dispatch

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/dispatch/cluster"
)

// An outage's warning counts every update of its failed batches (not one
// per batch), names the error that began it, and is given once: a second
// outage is counted from nothing, and its own warning (here at shutdown)
// carries only its batches.
func TestReturnerOutageSummaryCountsUpdatesOfEachOutage(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	first, second, third := errors.New("dial refused"), errors.New("i/o timeout"), errors.New("reset")
	var o applyOutage
	o.record(log, 3, 0, first)
	o.record(log, 2, 0, second)
	o.record(log, 4, 0, nil)
	o.record(log, 1, 0, nil) // no outage since the last summary: nothing to say
	o.record(log, 5, 0, third)
	o.end(log, "until shutdown")
	o.end(log, "until shutdown") // already summarised

	warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
	if len(warns) != 2 {
		t.Fatalf("%d outage warnings, want 2: %v", len(warns), warns)
	}
	for i, want := range []struct {
		batches, updates int64
		err              string
	}{{2, 5, first.Error()}, {1, 5, third.Error()}} {
		f := warns[i].ContextMap()
		if f["batches"] != want.batches || f["updates"] != want.updates || f["error"] != want.err {
			t.Fatalf("outage %d summarised as %v, want %d batches, %d updates, error %q", i+1, f, want.batches, want.updates, want.err)
		}
	}
	if d := logs.FilterLevelExact(zapcore.DebugLevel).Len(); d != 3 {
		t.Fatalf("%d failed batches logged at debug level, want 3", d)
	}
}

// A return is fenced only for a lease whose re-add is unsure and was sent
// less than a TTL ago; the unsure entry ends with the return either way,
// and ops of other kinds neither record nor fence anything.
func TestUnsureReaddFencesOnlyReturnsOfFreshEntries(t *testing.T) {
	const ttl = time.Minute
	t0 := time.Now()
	u := unsureReadds{}
	u.add([]cluster.Update{
		{Kind: cluster.OpReadd, ID: "e/1"},
		{Kind: cluster.OpReadd, ID: "e/2"},
		{Kind: cluster.OpReturn, ID: "e/3"},
		{Kind: cluster.OpWait, ID: "e/w4:0"},
	}, t0, ttl)
	if len(u) != 2 {
		t.Fatalf("unsure holds %v, want the two re-adds only", u)
	}
	batch := []cluster.Update{
		{Kind: cluster.OpReturn, ID: "e/1"},
		{Kind: cluster.OpUnwait, ID: "e/2"}, // not a return of e/2
		{Kind: cluster.OpReturn, ID: "e/3"},
	}
	u.fence(batch, t0.Add(ttl-time.Millisecond), ttl)
	if !batch[0].Fence || batch[1].Fence || batch[2].Fence {
		t.Fatalf("fenced %v, want only the return of e/1", batch)
	}
	if _, ok := u["e/1"]; ok || len(u) != 1 {
		t.Fatalf("unsure holds %v after e/1's return, want only e/2", u)
	}
	late := []cluster.Update{{Kind: cluster.OpReturn, ID: "e/2"}}
	u.fence(late, t0.Add(ttl), ttl)
	if late[0].Fence || len(u) != 0 {
		t.Fatalf("a return a TTL after its re-add: fenced %v, unsure %v; want unfenced and forgotten", late[0].Fence, u)
	}
}

// The unsure set holds at most maxUnsure leases: a re-add past the bound
// is not recorded while every entry is younger than a TTL, and is once
// the stale ones are dropped.
func TestUnsureReaddBoundDropsStaleEntriesFirst(t *testing.T) {
	const ttl = time.Minute
	t0 := time.Now()
	u := unsureReadds{}
	full := make([]cluster.Update, 0, maxUnsure)
	for i := range maxUnsure {
		full = append(full, cluster.Update{Kind: cluster.OpReadd, ID: "old/" + strconv.Itoa(i)})
	}
	u.add(full, t0, ttl)
	if len(u) != maxUnsure {
		t.Fatalf("unsure holds %d, want %d", len(u), maxUnsure)
	}
	u.add([]cluster.Update{{Kind: cluster.OpReadd, ID: "new/1"}}, t0.Add(ttl-time.Millisecond), ttl)
	if _, ok := u["new/1"]; ok || len(u) != maxUnsure {
		t.Fatalf("a re-add past the bound was recorded (%d entries)", len(u))
	}
	if _, ok := u["old/0"]; !ok {
		t.Fatal("an entry younger than a TTL was dropped")
	}
	u.add([]cluster.Update{{Kind: cluster.OpReadd, ID: "new/2"}}, t0.Add(ttl), ttl)
	if _, ok := u["new/2"]; !ok || len(u) != 1 {
		t.Fatalf("with every entry a TTL old, unsure holds %d entries (new one recorded: %v), want only the new one", len(u), ok)
	}
}
