package nodeagent

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A lookup asked for by a freed address that fails (a DNS blip) is asked
// again at the next interval: with another of the name's sessions up,
// nothing else would look the name up, and the freed address would get no
// session from this node.
func TestFreedAddressLookupThatFailsIsAskedAgain(t *testing.T) {
	gate := make(chan struct{})
	// x rejects for good the registrations that arrived before the gate
	// opened (the address dialled as given) and accepts later ones.
	x := startFakeEdgeOn(t, "127.0.0.2:0", mockPayload(1), func(int) iop.RejectCode {
		select {
		case <-gate:
			return iop.RejectCode_REJECT_CODE_UNSPECIFIED
		default:
		}
		<-gate
		return iop.RejectCode_REJECT_CODE_CREDENTIALS
	})
	_, port, _ := net.SplitHostPort(x.addr)
	y := startFakeEdgeOn(t, net.JoinHostPort("127.0.0.3", port), mockPayload(1), nil)
	var lookups atomic.Int64
	var failNext atomic.Bool
	old := lookupHost
	lookupHost = func(ctx context.Context, host string) ([]string, error) {
		lookups.Add(1)
		if failNext.CompareAndSwap(true, false) {
			return nil, &net.DNSError{Err: "server misbehaving", Name: host, IsTemporary: true}
		}
		return []string{"127.0.0.2", "127.0.0.3"}, nil
	}
	t.Cleanup(func() { lookupHost = old })
	policy := dnsPolicy(0)
	policy.Dial.HandshakeTimeout = 30 * time.Second // x holds the literal's registration until the gate opens
	done, stop := runEntries(t, policy, []string{net.JoinHostPort("127.0.0.2", port), net.JoinHostPort("alias.test", port)}, newTestAgent(t), zap.NewNop())
	readyOrStopped(t, y, done) // the name serves y and was refused x
	// Let the name settle (no lookups while its session is up), so that the
	// failing lookup is the one the freed address asks for.
	for n := lookups.Load(); ; {
		time.Sleep(100 * time.Millisecond)
		if m := lookups.Load(); m == n {
			break
		} else {
			n = m
		}
	}
	failNext.Store(true)
	close(gate) // the literal is rejected for good and lets x go
	readyOrStopped(t, x, done)
	if err := stop(); err != nil {
		t.Fatalf("RunEdges after shutdown = %v, want nil", err)
	}
}
