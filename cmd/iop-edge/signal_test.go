package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testcaps"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// SIGTERM while a SIGHUP reload waits on a node that never answers its
// config refresh (each push may wait 15 s) still drains and exits 0 at
// once: the reload does not hold the signal loop.
func TestSIGTERMDuringStalledReloadExits0(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildEdge(t)
	httpAddr, nodeAddr := freeAddr(t), freeAddr(t)
	cfgFile := filepath.Join(t.TempDir(), "edge.yaml")
	writeCfg := func(capacity int) {
		t.Helper()
		if err := os.WriteFile(cfgFile, []byte(fmt.Sprintf(`
listen: {http: %q, node: %q}
log: {level: info}
nodes:
  - id: a
    token: tok-a
    heartbeat_interval_sec: 1
    heartbeat_timeout_sec: 120
    providers: [{name: m, type: mock, capacity: %d}]
models:
  - name: echo
    providers: [{node: a, provider: m, target: echo}]
`, httpAddr, nodeAddr, capacity)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeCfg(1)
	var out syncBuffer
	cmd := exec.Command(bin, "--config", cfgFile)
	cmd.SysProcAttr = gatewayProcAttr()
	exited := startHealthy(t, cmd, &out, httpAddr)

	// A node that registers, becomes ready, heartbeats, and takes every
	// stream the edge opens without ever answering.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cc, reg, err := nodewire.Dial(ctx, nodewire.DialConfig{Address: nodeAddr, HandshakeTimeout: 10 * time.Second},
		&iop.RegisterRequest{ProtocolVersion: nodewire.ProtocolVersion, NodeId: "a", Token: "tok-a"})
	if err != nil {
		t.Fatalf("node dial: %v\n%s", err, out.String())
	}
	defer cc.Close()
	if err := cc.ReadyWith(ctx, &iop.NodeReadyRequest{NodeId: "a", Adapters: testcaps.For(reg.GetConfig())}); err != nil {
		t.Fatalf("node ready: %v", err)
	}
	refresh := make(chan struct{}, 1)
	served := make(chan struct{})
	// Owner: the test. Stops when the connection closes (the edge exits)
	// or ctx is cancelled.
	go func() {
		defer close(served)
		_ = cc.Serve(ctx, func(hctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
			if first.GetNodeConfigRefreshRequest() != nil {
				select {
				case refresh <- struct{}{}:
				default:
				}
			}
			<-hctx.Done()
		})
	}()
	defer func() { cancel(); _ = cc.Close(); <-served }()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := client.Get("http://" + httpAddr + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node never became dispatchable:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	writeCfg(2)
	_ = cmd.Process.Signal(syscall.SIGHUP)
	select {
	case <-refresh:
	case <-time.After(10 * time.Second):
		t.Fatalf("the reload never pushed a refresh:\n%s", out.String())
	}
	start := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, out.String())
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("exit took %s after SIGTERM", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no exit within 5 s of SIGTERM during a stalled reload:\n%s", out.String())
	}
}
