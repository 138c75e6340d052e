package h1client

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// interruptConn reports when the connection was interrupted (its deadline
// moved into the past). It hides the socket: bodies are read through Read.
type interruptConn struct {
	net.Conn
	once        sync.Once
	interrupted chan struct{}
}

func (c *interruptConn) SetDeadline(t time.Time) error {
	if !t.IsZero() && t.Before(time.Now()) {
		c.once.Do(func() { close(c.interrupted) })
	}
	return c.Conn.SetDeadline(t)
}

// interruptTransport is a Transport whose every connection is an
// interruptConn, handed on conns as it is dialled (one at a time: the
// channel holds one).
func interruptTransport() (*Transport, <-chan *interruptConn) {
	conns := make(chan *interruptConn, 1)
	var d net.Dialer
	tr := New(Options{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		ic := &interruptConn{Conn: nc, interrupted: make(chan struct{})}
		conns <- ic
		return ic, nil
	}})
	return tr, conns
}

// A request cancelled while its answer is read interrupts the connection
// (its deadline is then in the past for good), so the connection is not
// kept for the next request even when the rest of the answer was already
// buffered and the body still ends cleanly.
func TestCancelledConnectionIsNotKeptAfterCleanEnd(t *testing.T) {
	u, _ := keepOpenServer(t, "okok", "")
	tr, conns := interruptTransport()
	defer tr.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ic := <-conns
	buf := make([]byte, 2)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-ic.interrupted:
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled request did not interrupt its connection")
	}
	// The rest came with the head: the body ends without a socket read.
	rest, _ := io.ReadAll(resp.Body)
	if string(buf)+string(rest) != "okok" {
		t.Fatalf("body %q", string(buf)+string(rest))
	}
	if n := tr.IdleConns(); n != 0 {
		t.Fatalf("%d idle connections: an interrupted connection was kept", n)
	}
}
