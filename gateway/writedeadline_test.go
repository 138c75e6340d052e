package gateway

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch"
)

// cancelRecorder is a canceller that hands each reason to the test.
type cancelRecorder chan string

func (c cancelRecorder) Cancel(reason string) {
	select {
	case c <- reason:
	default:
	}
}

// A write to a client that stopped reading runs into the write deadline;
// net/http, seeing the failed write, cancels the request's context, and
// the relay may see the client gone (clientGone records
// client_disconnect) before it handles the error. The cancellation is
// still counted as write_error: the client stalled, it did not leave. The
// test takes that order deterministically.
func TestWriteDeadlineAfterClientGoneCountsWriteError(t *testing.T) {
	cfg := &config.Edge{}
	if err := cfg.Normalize(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	s := New(Options{Config: cfg, Metrics: NewMetrics(reg)})
	type result struct {
		watched string
		err     error
		rr      dispatch.ReleaseReason
		reason  string
	}
	done := make(chan result, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var cs cancelState
		x := make(cancelRecorder, 1)
		d := newDeadlineWriter(w, 200*time.Millisecond)
		piece := make([]byte, 64<<10)
		var err error
		for err == nil {
			_, err = d.Write(piece)
		}
		var res result
		res.err = err
		// The relay's wait sees the context net/http cancelled before
		// writeFailed runs (as the watch did, in its own goroutine).
		<-r.Context().Done()
		_ = cs.clientGone(x, dispatch.ErrCallerDone)
		select {
		case res.watched = <-x:
		case <-time.After(10 * time.Second):
		}
		in := &reqInfo{}
		res.rr = s.writeFailed(in, &cs, x, err)
		res.reason = in.cancelReason
		done <- res
	}))
	t.Cleanup(srv.Close)

	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: edge\r\n\r\n") // and never read

	var res result
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler's writes never failed (write deadline 200 ms)")
	}
	if !os.IsTimeout(res.err) {
		t.Fatalf("write failed with %v, want the write deadline", res.err)
	}
	if res.watched != CancelClientDisconnect {
		t.Fatalf("the watch recorded %q, want %q (net/http cancels the request on a failed write)", res.watched, CancelClientDisconnect)
	}
	if res.rr != dispatch.ReasonCancelled || res.reason != CancelWriteError {
		t.Errorf("writeFailed: %v, cancel reason %q; want cancelled, %q", res.rr, res.reason, CancelWriteError)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "iop_cancellations_total" {
			for _, m := range mf.GetMetric() {
				got[labelValue(m, "reason")] = m.GetCounter().GetValue()
			}
		}
	}
	if got[CancelWriteError] != 1 || got[CancelClientDisconnect] != 0 {
		t.Errorf("iop_cancellations_total by reason = %v, want write_error 1, client_disconnect 0", got)
	}
}
