package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/stack"
)

// A signal that lands after the second signal cut the drain but before
// the final stop (held there by the test build's hook until it waits on
// the channel) has its default action: a stop that hangs is killed by
// it. TestThirdSignalAfterTheCutKillsAStopThatHangs sends it at a moment
// it does not choose, mostly after the final stop.
func TestSignalBetweenTheCutAndTheFinalStopKillsAStopThatHangs(t *testing.T) {
	t.Setenv("IOP_NODE_TEST_HOLD_FINAL_STOP", "1") // inherited by the node (testhooks.go)
	collector := startStuckCollector(t)
	s := startTracedNode(t, collector, "reconnect:\n  interval_sec: 0.05\n  max_attempts: 0\nshutdown:\n  drain_sec: 600\n")
	answer := s.stream(t)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	stack.WaitFor(t, 10*time.Second, "the provider shown draining", func() bool { return s.health(t) == "draining" })
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	stack.WaitFor(t, 20*time.Second, "the final stop held", func() bool {
		return strings.Contains(s.out.String(), "final stop held until a signal waits")
	})
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	s.killedBy(t, syscall.SIGTERM)
	select {
	case <-answer:
	case <-time.After(20 * time.Second):
		t.Fatal("the held answer never ended")
	}
}
