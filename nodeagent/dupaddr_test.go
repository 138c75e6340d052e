package nodeagent

import (
	"errors"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// listedTwiceSpendsOneBudget runs entries (one edge, listed twice in two
// spellings) against an edge that rejects every registration for good,
// and requires one rejection: the entries are one entry, whose fatal
// rejection ends it, and no twin takes the address over for a second try.
func listedTwiceSpendsOneBudget(t *testing.T, entries func(port string) []string) {
	t.Helper()
	fatal := func(int) iop.RejectCode { return iop.RejectCode_REJECT_CODE_CREDENTIALS }
	edges, port := scriptedEdgesOnOnePort(t, fatal, "127.0.0.2")
	newMovableDNS(t, "127.0.0.2")
	done, _ := runEntries(t, dnsPolicy(0), entries(port), newTestAgent(t), zap.NewNop())
	select {
	case err := <-done:
		if !errors.Is(err, ErrFatal) {
			t.Fatalf("RunEdges = %v, want the fatal rejection", err)
		}
		done <- err // for the cleanup's stop
	case <-time.After(30 * time.Second):
		t.Fatal("RunEdges still runs after the edge's fatal rejection")
	}
	if got := edges[0].registrations(); got != 1 {
		t.Fatalf("%d registrations with the edge, want 1 (one entry, one rejection)", got)
	}
}

func TestEdgeListedTwiceSpendsOneBudget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries func(port string) []string
	}{
		{"an address, its port spelt two ways", func(port string) []string {
			return []string{net.JoinHostPort("127.0.0.2", port), net.JoinHostPort("127.0.0.2", "+"+port)}
		}},
		{"a name in two cases", func(port string) []string {
			return []string{net.JoinHostPort("edge.test", port), net.JoinHostPort("EDGE.test", "0"+port)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { listedTwiceSpendsOneBudget(t, tc.entries) })
	}
}
