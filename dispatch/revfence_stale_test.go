package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// An exchange that fails to open forgets the lease's earlier one: a fence
// after it returns the lease node_lost, never with the reason of a
// terminal the earlier exchange still holds unread (that exchange no
// longer describes the lease's work).
func TestFenceAfterFailedOpenIgnoresEarlierExchange(t *testing.T) {
	f := newFixture(t, buildCfg(t, oneNodeCfg(t, 2), oneNodeModels), nil)
	n := startWireNode(t, f, answerWholeThenGo(runEnv(iop.RunEventType_RUN_EVENT_TYPE_COMPLETE)))
	l := mustAcquire(t, f.d, Request{Model: "m"})
	first := mustOpenRun(t, l)
	waitFor(t, "the first answer at the edge", first.Ready)
	// The next exchange on the lease fails before anything is sent: its
	// request does not encode (a string that is not UTF-8).
	bad := runReq()
	bad.RunId = "run_\xff"
	if _, err := l.OpenRun(context.Background(), time.Time{}, bad); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("open with a request that does not encode: %v, want ErrInvalidRequest", err)
	}
	_ = n.cc.Close()
	waitFor(t, "the fence", func() bool { rel, _ := l.Released(); return rel })
	if _, reason := l.Released(); reason != ReasonNodeLost {
		t.Fatalf("fenced after a failed open: released as %q, want %q", reason, ReasonNodeLost)
	}
	first.Close()
}
