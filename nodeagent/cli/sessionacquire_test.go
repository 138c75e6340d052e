package cli

import (
	"context"
	"fmt"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func benchInstance(b *testing.B) *instance {
	b.Helper()
	inst, err := New(&iop.AdapterConfig{Name: "agent", Type: Type, Command: []string{"true"}},
		adapter.Env{WorkspaceRoot: b.TempDir(), StoreDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	return inst.(*instance)
}

// BenchmarkSessionAcquireRelease is the session bookkeeping every run of a
// session pays: finding it, taking its slot and giving it back.
func BenchmarkSessionAcquireRelease(b *testing.B) {
	inst := benchInstance(b)
	ctx := context.Background()
	// A session with state, as after its first run.
	s, err := inst.acquireSession(ctx, "s")
	if err != nil {
		b.Fatal(err)
	}
	inst.unregisterRun(s, true)
	inst.releaseSession(s)
	for b.Loop() {
		s, err := inst.acquireSession(ctx, "s")
		if err != nil {
			b.Fatal(err)
		}
		inst.releaseSession(s)
	}
}

// BenchmarkNewSession is a new session at the default bound of idle
// sessions, where the least recently used one is evicted (its state
// directory removed) to make room, and under it. Each session writes its
// state, as its run would.
func BenchmarkNewSession(b *testing.B) {
	for _, atBound := range []bool{true, false} {
		b.Run(fmt.Sprintf("at_bound=%v", atBound), func(b *testing.B) {
			inst := benchInstance(b)
			if !atBound {
				inst.cfg.maxSessions = maxMaxSessions
			}
			ctx := context.Background()
			i := 0
			for b.Loop() {
				s, err := inst.acquireSession(ctx, fmt.Sprintf("session-%d", i))
				if err != nil {
					b.Fatal(err)
				}
				st := sessionState{ID: s.id, Runs: 1}
				if err := writeState(s.dir, &st); err != nil {
					b.Fatal(err)
				}
				inst.unregisterRun(s, true)
				inst.releaseSession(s)
				i++
				if !atBound && i == maxMaxSessions {
					b.Fatal("bound reached")
				}
			}
		})
	}
}
