package gateway

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch"
)

// A write that fails because the client reset its connection is the
// client leaving, counted client_disconnect as when the relay's wait sees
// it first; a write that fails for another reason (a Messages conversion's
// bound) stays write_error. Over a real socket: the client reads the
// answer's start, then resets the connection (SO_LINGER 0).
func TestWriteBrokenByTheClientsResetIsClientDisconnect35(t *testing.T) {
	cfg := &config.Edge{}
	if err := cfg.Normalize(); err != nil {
		t.Fatal(err)
	}
	s := New(Options{Config: cfg, Metrics: NewMetrics(prometheus.NewRegistry())})
	type result struct {
		err    error
		sent   string
		reason string
		rr     dispatch.ReleaseReason
	}
	done := make(chan result, 1)
	started := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var cs cancelState
		x := make(cancelRecorder, 1)
		d := newDeadlineWriter(w, 10*time.Second)
		w.Header().Set("Content-Type", "text/event-stream")
		_, err := d.Write([]byte("data: {}\n\n"))
		if err == nil {
			err = d.Flush()
		}
		close(started)
		piece := make([]byte, 16<<10)
		stop := time.Now().Add(20 * time.Second)
		for err == nil && time.Now().Before(stop) {
			if _, err = d.Write(piece); err == nil {
				err = d.Flush()
			}
		}
		var res result
		res.err = err
		in := &reqInfo{}
		res.rr = s.writeFailed(in, &cs, x, err)
		res.reason = in.cancelReason
		select {
		case res.sent = <-x:
		default:
		}
		done <- res
	}))
	t.Cleanup(srv.Close)

	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: edge\r\n\r\n")
	if _, err := io.ReadFull(c, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler never wrote")
	}
	_ = c.(*net.TCPConn).SetLinger(0)
	_ = c.Close()

	var res result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler's writes never failed after the client's reset")
	}
	if !clientLeft(res.err) {
		t.Fatalf("write failed with %v, want the peer's reset", res.err)
	}
	if res.rr != dispatch.ReasonCancelled || res.reason != CancelClientDisconnect || res.sent != CancelClientDisconnect {
		t.Errorf("writeFailed: %v, reason %q, cancel sent %q; want cancelled, %q", res.rr, res.reason, res.sent, CancelClientDisconnect)
	}

	// Another failure is the client's fault no more than the edge's: write_error.
	var cs cancelState
	x := make(cancelRecorder, 1)
	in := &reqInfo{}
	if rr := s.writeFailed(in, &cs, x, fmt.Errorf("gateway: %w", errors.New("answer too large"))); rr != dispatch.ReasonCancelled || in.cancelReason != CancelWriteError {
		t.Errorf("a conversion failure: %v, reason %q; want cancelled, %q", rr, in.cancelReason, CancelWriteError)
	}
}
