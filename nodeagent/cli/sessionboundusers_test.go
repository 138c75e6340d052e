//go:build unix

package cli

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
)

// A run that gave up waiting for its session's slot (its context ended)
// no longer counts as a user: once the run holding the session ends, the
// session is idle and may be evicted for a new one.
func TestRunThatStoppedWaitingDoesNotPinItsSession(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{blockingScript(t)}, boundSettings(1))
	ch, _, fifo := startBlocked(t, inst, "a")
	ctx, cancel := context.WithCancel(context.Background())
	waiting := runAsync(ctx, inst, sessionRun(t, "a", "user", "q"), newChanSink())
	// The second run counts itself a user before it waits: a new session
	// is refused while both hold a.
	eventually(t, "the second run waiting", func() bool {
		inst.mu.Lock()
		defer inst.mu.Unlock()
		return inst.sessions["a"].users == 2
	})
	cancel()
	if o := await(t, waiting); !errors.Is(o.err, context.Canceled) {
		t.Fatalf("waiting run: err = %v, want canceled", o.err)
	}
	unblock(t, fifo)
	if o := await(t, ch); o.err != nil {
		t.Fatalf("blocked run: %v", o.err)
	}
	mustRun(t, inst, "b")
	if got, want := storedSessions(t, inst), []string{"b"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q (a evicted)", got, want)
	}
}

// A session keeps its place once its state is stored, whatever a later
// run does: a run whose CLI fails to start (and so writes no state) does
// not make the node forget a session whose state stays on disk.
func TestSessionWithStateIsKeptAfterARunThatDidNotStart(t *testing.T) {
	r := newRig(t)
	sh := script(t, argsScript)
	inst := r.instance(t, []string{sh}, boundSettings(2))
	mustRun(t, inst, "a")
	// The CLI now fails to start: its interpreter is gone.
	if err := os.WriteFile(sh, []byte("#!/nonexistent/interpreter\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := runSync(t, inst, sessionRun(t, "a", "user", "q")); err == nil {
		t.Fatal("a run whose CLI cannot start succeeded")
	}
	if got := listedSessions(inst); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("sessions %q, want a listed (its state is stored)", got)
	}
	if got := storedSessions(t, inst); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("stored %q, want a", got)
	}
}

// A terminated session gives its place back: a new session then fits
// without evicting another, and the terminated one is not evicted again.
func TestTerminatedSessionFreesItsPlace(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{script(t, argsScript)}, boundSettings(2))
	mustRun(t, inst, "a")
	mustRun(t, inst, "b")
	if err := inst.TerminateSession("a"); err != nil {
		t.Fatal(err)
	}
	mustRun(t, inst, "c")
	if got, want := storedSessions(t, inst), []string{"b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
	mustRun(t, inst, "d")
	if got, want := storedSessions(t, inst), []string{"c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
}

// A session terminated while a run holds it is not counted twice when
// that run ends: the bound still holds for the sessions that follow.
func TestSessionTerminatedDuringARunKeepsTheBound(t *testing.T) {
	r := newRig(t)
	inst := r.instance(t, []string{blockingScript(t)}, boundSettings(2))
	ch, _, _ := startBlocked(t, inst, "a")
	// Termination stops a's process; the run ends, then the state goes.
	if err := inst.TerminateSession("a"); err != nil {
		t.Fatal(err)
	}
	await(t, ch)
	for _, sid := range []string{"b", "c", "d", "e"} {
		mustRun(t, inst, sid)
	}
	if got, want := storedSessions(t, inst), []string{"d", "e"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
	inst.mu.Lock()
	live := inst.live
	inst.mu.Unlock()
	if live != 2 {
		t.Fatalf("live = %d, want 2", live)
	}
}
