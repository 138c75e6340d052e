package edgeapp

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/dispatch/cluster"
	"github.com/iop-gateway/iop/internal/testredis"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An edge closing with a request still running on a node returns that
// request's ledger slot: the node connections close (the lease ends as
// node_lost) before the ledger does, which waits for that return. With
// the ledger closed first the return was never sent, and the slot stayed
// taken in every edge's count for the lease TTL (a minute here).
func TestEdgeCloseReturnsSlotsOfRunningRequests(t *testing.T) {
	rs := testredis.Start(t)
	_, cfg := edgeFile(t, "listen: {http: '127.0.0.1:0', node: '127.0.0.1:0'}\n"+
		"cluster: {redis: {address: '"+rs.Addr+"', lease_ttl_sec: 60, timeout_ms: 2000}}\n"+oneNodeYAML)
	e := serveEdge(t, cfg, Options{HealthInterval: -1})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, resp, err := nodewire.Dial(ctx, nodewire.DialConfig{Address: e.NodeAddr},
		&iop.RegisterRequest{ProtocolVersion: nodewire.ProtocolVersion, NodeId: "a", Token: "tok"})
	if err != nil || !resp.GetAccepted() {
		t.Fatalf("register: %v %v", resp, err)
	}
	defer cc.Close()
	if err := cc.Ready(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	// Owner: this test; ends when the edge closes the connection.
	go func() {
		defer close(served)
		_ = cc.Serve(context.Background(), func(hctx context.Context, _ *nodewire.Stream, _ *iop.Envelope) { <-hctx.Done() })
	}()
	defer func() { <-served }()

	l, err := e.Dispatcher.Acquire(ctx, dispatch.Request{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(dispatch.ReasonCompleted) // a no-op once node_lost released it
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	key := cluster.Key("a", "m")
	if n := rdb.ZCard(ctx, key).Val(); n != 1 {
		t.Fatalf("%d leases in the ledger while the request runs, want 1", n)
	}
	e.Close()
	if n := rdb.ZCard(ctx, key).Val(); n != 0 {
		t.Fatalf("%d leases left in the ledger after the edge closed, want 0", n)
	}
}
