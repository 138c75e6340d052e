package main

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/stack"
)

// A signal delivered in the moment before the final stop (after the drain
// was cut, before signal.Stop) waits on the channel nothing reads any
// more: final raises it again, so it has its default action as one sent
// a moment later would.
func TestSignalJustBeforeTheFinalStopIsRaisedAgain(t *testing.T) {
	s := newStartSignals(make(chan os.Signal, 1))
	var raised []os.Signal
	s.raise = func(sig os.Signal) { raised = append(raised, sig) }
	if sig := s.handOver(); sig != nil {
		t.Fatalf("handOver with no signal: %v", sig)
	}
	s.ch <- syscall.SIGTERM // delivered as the signal package does
	s.final()
	s.final() // called again (the drain's goroutine and run): nothing more
	if len(raised) != 1 || raised[0] != syscall.SIGTERM {
		t.Fatalf("raised %v, want [SIGTERM]", raised)
	}
	s.final()
	if len(raised) != 1 {
		t.Fatalf("raised %v with no signal waiting, want nothing more", raised)
	}
}

// SIGHUP in the final stop has its default action as SIGINT and SIGTERM
// do: no run is left for ignoring it to keep, and a stop that hangs (spans
// flushed to a collector that never answers) is killed by it, not held to
// the flush's bound.
func TestSIGHUPKillsAStopThatHangs(t *testing.T) {
	collector := startStuckCollector(t)
	s := startTracedNode(t, collector, "reconnect:\n  interval_sec: 0.05\n  max_attempts: 0\nshutdown:\n  drain_sec: 600\n")
	answer := s.stream(t)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	stack.WaitFor(t, 10*time.Second, "the provider shown draining", func() bool { return s.health(t) == "draining" })
	s.free()
	gotAnswer(t, answer)
	s.stuckInStop(t, collector, `"iop-node stopped"`)
	_ = s.cmd.Process.Signal(syscall.SIGHUP)
	s.killedBy(t, syscall.SIGHUP)
	if strings.Contains(s.out.String(), "SIGHUP ignored") {
		t.Fatalf("SIGHUP in the final stop was taken and ignored\n%s", s.out.String())
	}
}

// A third signal sent as soon as the second has cut the drain has its
// default action whether it lands before the final stop or after: a stop
// that hangs is killed by it.
func TestThirdSignalAfterTheCutKillsAStopThatHangs(t *testing.T) {
	collector := startStuckCollector(t)
	s := startTracedNode(t, collector, "reconnect:\n  interval_sec: 0.05\n  max_attempts: 0\nshutdown:\n  drain_sec: 600\n")
	answer := s.stream(t)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	stack.WaitFor(t, 10*time.Second, "the provider shown draining", func() bool { return s.health(t) == "draining" })
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	stack.WaitFor(t, 20*time.Second, "the cut logged", func() bool { return strings.Contains(s.out.String(), "second signal: stopping now") })
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	s.killedBy(t, syscall.SIGTERM)
	select {
	case <-answer:
	case <-time.After(20 * time.Second):
		t.Fatal("the held answer never ended")
	}
}
