package edgeapp

import (
	"net"
	"testing"
)

// Close releases both listeners even when Serve never ran (an edge built,
// then abandoned on a later start-up failure, or closed by a signal before
// its Serve goroutine got going): their ports can be bound again at once.
func TestCloseWithoutServeFreesPorts(t *testing.T) {
	e, err := New(testConfig(t), Options{HealthInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	for _, addr := range []string{e.HTTPAddr, e.NodeAddr} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("%s still bound after Close: %v", addr, err)
			continue
		}
		_ = ln.Close()
	}
	// Serve after Close returns at once, without error.
	if err := e.Serve(); err != nil {
		t.Errorf("Serve after Close: %v", err)
	}
}
