package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/stack"
)

// stuckCollector is an OTLP/HTTP collector that never answers: a node
// stopping with spans to flush hangs in the flush (tracing's shutdown
// bound, 5 s) until it is killed.
type stuckCollector struct {
	addr string
	got  chan struct{} // one value per export request that arrived
}

func startStuckCollector(t *testing.T) *stuckCollector {
	t.Helper()
	c := &stuckCollector{got: make(chan struct{}, 16)}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case c.got <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before srv.Close: lets the handlers return
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	c.addr = u.Host
	return c
}

// startTracedNode is startDrainSetup's edge and node, the node sending
// its spans to collector, with yaml (reconnect and shutdown sections).
func startTracedNode(t *testing.T, collector *stuckCollector, yaml string) *drainSetup {
	t.Helper()
	return startNodeWith(t, yaml+"tracing:\n  enabled: true\n  insecure: true\n  endpoint: "+collector.addr+"\n")
}

// stuckInStop waits until the node has logged line (said once it is
// stopping) and its span flush has reached the collector, which holds it.
func (s *drainSetup) stuckInStop(t *testing.T, collector *stuckCollector, line string) {
	t.Helper()
	stack.WaitFor(t, 20*time.Second, "the log line "+line, func() bool { return strings.Contains(s.out.String(), line) })
	select {
	case <-collector.got:
	case <-time.After(20 * time.Second):
		t.Fatalf("no span flush reached the collector\n%s", s.out.String())
	}
	select {
	case err := <-s.done:
		t.Fatalf("exited (%v) before the flush was held\n%s", err, s.out.String())
	default:
	}
}

// killedBy requires the process to end killed by sig (a stop that took
// the signal instead exits by itself once the flush's bound passes).
func (s *drainSetup) killedBy(t *testing.T, sig syscall.Signal) {
	t.Helper()
	select {
	case err := <-s.done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != sig {
			t.Fatalf("exit %v after %v during a stop that hangs, want killed by it\n%s", err, sig, s.out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%v did not kill a stop that hangs\n%s", sig, s.out.String())
	}
}

// Once the drain is over (it ended, or a second signal cut it), SIGINT
// and SIGTERM have their default action again: a stop that then hangs
// (here: spans flushed to a collector that never answers) is killed by
// the next signal, not held to its bound.
func TestSignalAfterTheDrainKillsAStopThatHangs(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, s *drainSetup, answer <-chan string)
	}{
		{"drained", func(t *testing.T, s *drainSetup, answer <-chan string) {
			s.free()
			gotAnswer(t, answer)
		}},
		{"cut by a second signal", func(t *testing.T, s *drainSetup, answer <-chan string) {
			_ = s.cmd.Process.Signal(syscall.SIGINT)
			gotAnswer(t, answer)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			collector := startStuckCollector(t)
			s := startTracedNode(t, collector, "reconnect:\n  interval_sec: 0.05\n  max_attempts: 0\nshutdown:\n  drain_sec: 600\n")
			answer := s.stream(t)
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
			stack.WaitFor(t, 10*time.Second, "the provider shown draining", func() bool { return s.health(t) == "draining" })
			tc.end(t, s, answer)
			s.stuckInStop(t, collector, `"iop-node stopped"`)
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
			s.killedBy(t, syscall.SIGTERM)
		})
	}
}

// A node whose sessions gave up on their own (here: its reconnect budget
// ran out after the edge went away) is stopping too: a signal then kills
// a stop that hangs instead of being taken, and dropped, by the drain's
// handler, which has nothing left to drain.
func TestSignalKillsAStopThatHangsAfterTheSessionsGaveUp(t *testing.T) {
	collector := startStuckCollector(t)
	s := startTracedNode(t, collector, "reconnect:\n  interval_sec: 0.05\n  max_attempts: 1\nshutdown:\n  drain_sec: 30\n")
	s.free()
	gotAnswer(t, s.stream(t)) // a span to flush at the stop
	s.edge.Close()
	s.stuckInStop(t, collector, `"giving up"`)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	s.killedBy(t, syscall.SIGTERM)
}
