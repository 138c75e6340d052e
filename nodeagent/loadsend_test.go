package nodeagent

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// scriptedSender answers each SendLoad with the next of errs (nil once they
// run out), recording each call's deadline as an offset from the call.
type scriptedSender struct {
	errs  []error
	calls chan time.Duration
	n     atomic.Int64
}

func (s *scriptedSender) SendLoad(_ *iop.LoadReport, deadline time.Time) error {
	i := s.n.Add(1) - 1
	select {
	case s.calls <- time.Until(deadline):
	default:
	}
	if int(i) < len(s.errs) {
		return s.errs[i]
	}
	return nil
}

// runReportLoad runs reportLoad for an agent with a 50 ms interval over s;
// done closes when reportLoad returns.
func runReportLoad(t *testing.T, s *scriptedSender) (done chan struct{}) {
	t.Helper()
	var probes atomic.Int64
	a := probedAgent(t, &probes, false)
	if _, err := a.Apply(loadPayload(50), true); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan struct{})
	// Owner: the test; stops at cancel (Cleanup) or a fatal send error.
	go func() { defer close(done); a.reportLoad(ctx, s) }()
	t.Cleanup(func() { cancel(); <-done })
	return done
}

func expectCalls(t *testing.T, s *scriptedSender, n int) []time.Duration {
	t.Helper()
	var out []time.Duration
	for len(out) < n {
		select {
		case d := <-s.calls:
			out = append(out, d)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d load report sends, want %d", len(out), n)
		}
	}
	return out
}

// A report the edge was too slow to take in its interval is skipped: the
// next one is sent, each bounded by the interval, not an hour.
func TestLoadReportNotTakenInTimeIsSkipped(t *testing.T) {
	late := fmt.Errorf("nodewire: load report: %w", os.ErrDeadlineExceeded)
	s := &scriptedSender{errs: []error{late, late}, calls: make(chan time.Duration, 16)}
	runReportLoad(t, s)
	for i, d := range expectCalls(t, s, 4) {
		if d > 50*time.Millisecond {
			t.Fatalf("send %d: deadline %v ahead, want at most the 50 ms interval", i, d)
		}
	}
}

// A report cut mid-frame (the control stream is unusable; its error also
// wraps the write's timeout) or failed otherwise ends the reports.
func TestLoadReportsEndWhenSendFails(t *testing.T) {
	for name, err := range map[string]error{
		"cut":    fmt.Errorf("nodewire: load report: %w: %w", nodewire.ErrStreamCut, os.ErrDeadlineExceeded),
		"closed": fmt.Errorf("nodewire: load report: %w", nodewire.ErrClosed),
	} {
		t.Run(name, func(t *testing.T) {
			s := &scriptedSender{errs: []error{err}, calls: make(chan time.Duration, 16)}
			done := runReportLoad(t, s)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("reports go on after %v", err)
			}
			if n := s.n.Load(); n != 1 {
				t.Fatalf("%d sends, want 1", n)
			}
		})
	}
}
