package main

import (
	"os"
	"syscall"
	"testing"
)

// A signal that comes at any moment around the end of start-up is never
// lost: handOver returns it (start-up's), or it waits on the channel the
// drain takes. Each round delivers one as the signal package does (a
// send on the buffered channel) at a varied moment before handOver.
func TestSignalAtHandOverNeverLost(t *testing.T) {
	for i := range 2000 {
		s := newStartSignals(make(chan os.Signal, 1))
		s.ch <- syscall.SIGTERM
		for j := 0; j < (i%100)*50; j++ { // vary where the watcher is
		}
		if sig := s.handOver(); sig != nil {
			if sig != syscall.SIGTERM {
				t.Fatalf("round %d: handOver returned %v", i, sig)
			}
			continue
		}
		select {
		case <-s.ch:
		default:
			t.Fatalf("round %d: the signal was neither start-up's nor left for the drain", i)
		}
	}
}

// After the hand-over, signals go to the drain (on s.ch), not to start-up,
// and a second handOver returns nothing.
func TestSignalAfterHandOverGoesToDrain(t *testing.T) {
	s := newStartSignals(make(chan os.Signal, 1))
	if sig := s.handOver(); sig != nil {
		t.Fatalf("handOver with no signal: %v", sig)
	}
	s.ch <- os.Interrupt
	if sig := s.handOver(); sig != nil {
		t.Fatalf("second handOver took %v", sig)
	}
	if sig := <-s.ch; sig != os.Interrupt {
		t.Fatalf("drain got %v", sig)
	}
}
