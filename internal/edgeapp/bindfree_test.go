package edgeapp

import (
	"net"
	"testing"
)

// When the HTTP port is taken, New gives back the node port it had already
// bound: a supervisor's retry (or the operator's fix) can bind it again.
func TestBindFailureFreesNodePort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nodeAddr := free.Addr().String()
	_ = free.Close()
	cfg := testConfig(t)
	cfg.Listen.HTTP, cfg.Listen.Node = taken.Addr().String(), nodeAddr
	if _, err := New(cfg, Options{HealthInterval: -1}); err == nil {
		t.Fatal("New succeeded on a taken port")
	}
	ln, err := net.Listen("tcp", nodeAddr)
	if err != nil {
		t.Fatalf("node port %s still bound after New failed: %v", nodeAddr, err)
	}
	_ = ln.Close()
}
