package edgeapp

import (
	"errors"
	"net"
	"testing"
	"time"
)

// failOnceListener fails its first Accept, as a listener out of
// descriptors does.
type failOnceListener struct {
	net.Listener
	failed bool
}

var errNoDescriptors = errors.New("accept: too many open files")

func (l *failOnceListener) Accept() (net.Conn, error) {
	if !l.failed {
		l.failed = true
		return nil, errNoDescriptors
	}
	return l.Listener.Accept()
}

// A failed Accept gives its slot back: otherwise each one (a burst of
// EMFILE) would lower listen.max_http_conns for good, down to an edge
// that accepts nothing.
func TestLimitListenerFreesSlotOnAcceptError(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newLimitListener(&failOnceListener{Listener: inner}, 1)
	defer ln.Close()
	if _, err := ln.Accept(); !errors.Is(err, errNoDescriptors) {
		t.Fatalf("first Accept: %v", err)
	}
	if got := len(ln.(*limitListener).sem); got != 0 {
		t.Fatalf("%d slot(s) held after a failed Accept", got)
	}
	c, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	_ = sc.Close()
}

// Close ends an Accept waiting for a slot, with every slot held by an open
// connection: a shutdown is not held until a client hangs up.
func TestLimitListenerCloseEndsAcceptWaitingForSlot(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newLimitListener(inner, 1)
	c, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	held, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	done := make(chan error, 1)
	// Owner: the test; ends when Close ends the Accept (or the test
	// fails, leaving it to the process).
	go func() { _, err := ln.Accept(); done <- err }()
	_ = ln.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Accept still waiting for a slot 30 s after Close")
	}
}
