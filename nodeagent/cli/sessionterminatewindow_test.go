//go:build unix

package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

// terminateFrom starts TerminateSession(sid) and returns once the session
// is marked terminated (TerminateSession may still be waiting for the
// slot); done closes when TerminateSession returns.
func terminateFrom(t *testing.T, inst *instance, s *session, sid string) (done chan struct{}) {
	done = make(chan struct{})
	// Owner: the test; TerminateSession returns once the slot is free (the
	// test fails if it never does).
	go func() {
		defer close(done)
		if err := inst.TerminateSession(sid); err != nil {
			t.Errorf("TerminateSession: %v", err)
		}
	}()
	eventually(t, "session marked terminated", func() bool {
		inst.mu.Lock()
		defer inst.mu.Unlock()
		return s.terminated
	})
	return done
}

// A run that takes the session's slot just as the session is terminated
// hands the slot to TerminateSession and runs on a fresh session; it does
// not keep the slot of the session being removed.
func TestRunTakingSlotOfTerminatedSessionStepsAside(t *testing.T) {
	r := newRig(t)
	marker := filepath.Join(t.TempDir(), "ran")
	inst := r.instance(t, []string{script(t, `echo x >> `+sq(marker))}, nil)

	var once sync.Once
	var termDone chan struct{}
	acquiredHook = func(s *session) { once.Do(func() { termDone = terminateFrom(t, inst, s, "w") }) }
	t.Cleanup(func() { acquiredHook = nil })

	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if _, err := inst.Run(ctx, sessionRun(t, "w", "user", "q"), newChanSink()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	select {
	case <-termDone:
	case <-ctx.Done():
		t.Fatal("TerminateSession still waiting for the slot")
	}
	if st := readStateFile(t, inst, "w"); st.Runs != 1 {
		t.Fatalf("state = %+v, want one run of the fresh session", st)
	}
}

// A session terminated between a run's taking its slot and its process
// starting fails the run: the process is not started, since nothing
// would stop it.
func TestRunOnSessionTerminatedBeforeStartFails(t *testing.T) {
	r := newRig(t)
	marker := filepath.Join(t.TempDir(), "ran")
	inst := r.instance(t, []string{script(t, `echo x >> `+sq(marker))}, nil)

	var once sync.Once
	var termDone chan struct{}
	registerHook = func(s *session) { once.Do(func() { termDone = terminateFrom(t, inst, s, "w") }) }
	t.Cleanup(func() { registerHook = nil })

	_, err := inst.Run(context.Background(), sessionRun(t, "w", "user", "q"), newChanSink())
	var ae *adapter.Error
	if !errors.As(err, &ae) || ae.Code != adapter.CodeUpstream {
		t.Fatalf("Run: err = %v, want an upstream error for the terminated session", err)
	}
	select {
	case <-termDone:
	case <-time.After(waitLong):
		t.Fatal("TerminateSession still waiting for the slot")
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the CLI ran on a terminated session (stat: %v)", err)
	}
}
