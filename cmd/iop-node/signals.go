package main

import (
	"os"
	"os/signal"
)

// startSignals holds SIGINT and SIGTERM from the top of run until
// start-up is through. The first one that comes during start-up is kept
// (the node stops once start-up is through, with exit 0, instead of being
// killed by the signal), and lets the next have its default action: a
// start-up that hangs (a file that never reads) can still be killed.
//
// One channel carries them throughout, so that none is lost at the
// hand-over: a signal is either seen by handOver or still waits in ch for
// whoever takes ch after it.
type startSignals struct {
	ch       chan os.Signal
	handover chan struct{} // closed by handOver
	done     chan struct{} // closed by the watcher as it exits
	got      os.Signal     // written by the watcher before it closes done
	// raise gives a signal its default action (raiseSelf; a test
	// records it instead).
	raise func(os.Signal)
}

// takeStartSignals starts holding sigs (signal.Notify with them).
func takeStartSignals(sigs ...os.Signal) *startSignals {
	s := newStartSignals(make(chan os.Signal, 1))
	signal.Notify(s.ch, sigs...)
	return s
}

// newStartSignals watches ch, a channel signal.Notify feeds (or a test).
func newStartSignals(ch chan os.Signal) *startSignals {
	s := &startSignals{ch: ch, handover: make(chan struct{}), done: make(chan struct{}), raise: raiseSelf}
	// Owner: the startSignals; stops at the first signal or at handOver,
	// which waits for it.
	go func() {
		defer close(s.done)
		select {
		case s.got = <-s.ch:
			signal.Stop(s.ch) // the next one has its default action
		case <-s.handover:
		}
	}()
	return s
}

// handOver ends start-up: it returns the signal that came during it, if
// any. Otherwise the signals are still taken, and every one from here on
// (including one racing with this call) arrives on s.ch. It may be called
// more than once; only the first call can return a signal.
func (s *startSignals) handOver() os.Signal {
	select {
	case <-s.handover:
		return nil
	default:
		close(s.handover)
	}
	<-s.done
	if s.got != nil {
		return s.got
	}
	// One that came as the watcher was told to stop (both ready to it)
	// waits here: it came during start-up too.
	select {
	case sig := <-s.ch:
		return sig
	default:
		return nil
	}
}

// stop lets the signals have their default action again.
func (s *startSignals) stop() { signal.Stop(s.ch) }

// final is stop for the node's final stop (the drain is over, or the
// sessions ended): from here a signal has its default action, including
// one that came just before, which nothing would read any more: it waits
// in s.ch (once signal.Stop returns no more arrive), and is raised again.
// Without that, a signal sent in the moment between a drain's cut and the
// stop would be lost, and a stop that then hangs would not be killed by
// it. It may be called more than once, from more than one goroutine: the
// signal waiting goes to one of them.
func (s *startSignals) final() {
	signal.Stop(s.ch)
	select {
	case sig := <-s.ch:
		s.raise(sig)
	default:
	}
}

// raiseSelf sends sig to the process itself: after signal.Stop, its
// default action (for SIGINT and SIGTERM: the process ends, killed by it).
func raiseSelf(sig os.Signal) {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Signal(sig)
	}
}
