package mockup

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"time"
)

// upstreamWatch is a reverse proxy's transport to the mock that records
// how the mock ends connections: an answer announcing its close
// (Connection: close, which the proxy strips before its client sees it)
// or a read that meets the mock's close (EOF or a reset) while the
// transport still holds the connection. A count of dials cannot tell
// these apart from the transport's own choice: it drops a connection
// whose request write it has not seen acknowledged within 50 ms of the
// answer (maxWriteWaitBeforeConnReuse), which a loaded machine exceeds;
// it closes that connection itself, and a read of a connection closed on
// this side is net.ErrClosed, not counted here.
type upstreamWatch struct {
	tr        *http.Transport
	dials     atomic.Int64
	announced atomic.Int64 // answers with Connection: close
	hungUp    atomic.Int64 // reads that met the mock's close
}

func newUpstreamWatch() *upstreamWatch {
	w := &upstreamWatch{}
	d := &net.Dialer{Timeout: 5 * time.Second}
	w.tr = &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			w.dials.Add(1)
			return watchedConn{Conn: c, hungUp: &w.hungUp}, nil
		},
		DisableCompression: true,
	}
	return w
}

func (w *upstreamWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := w.tr.RoundTrip(r)
	if err == nil && resp.Close {
		w.announced.Add(1)
	}
	return resp, err
}

// watchedConn counts the reads that meet the peer's close.
type watchedConn struct {
	net.Conn
	hungUp *atomic.Int64
}

func (c watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
		c.hungUp.Add(1)
	}
	return n, err
}
