package nodewire

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/iop-gateway/iop/internal/testcert"
)

// tlsPair returns the two ends of a TLS connection over loopback, both
// handshaken, with socket buffers of about bufSize (the server's for
// writing, the client's for reading), so that a peer that does not read
// blocks the other side's writes early.
func tlsPair(t *testing.T, bufSize int) (server, client *tls.Conn) {
	t.Helper()
	dir := t.TempDir()
	ca := testcert.NewCA(t, dir, "edge")
	certFile, keyFile := ca.Issue(t, "edge", true)
	scfg := serverTLS(t, certFile, keyFile, "")
	ccfg := clientTLS(t, ca.File, "edge.test", "", "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	// Owner: this call; ends with the one accept.
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	rawC, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	rawS, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	_ = rawC.(*net.TCPConn).SetReadBuffer(bufSize)
	_ = rawS.(*net.TCPConn).SetWriteBuffer(bufSize)
	server, client = tls.Server(rawS, scfg), tls.Client(rawC, ccfg.config(""))
	t.Cleanup(func() { _ = server.Close(); _ = client.Close() })
	_ = rawS.SetDeadline(time.Now().Add(waitLong))
	_ = rawC.SetDeadline(time.Now().Add(waitLong))
	hs := make(chan error, 1)
	// Owner: this call; ends with the handshake (bounded by the deadline).
	go func() { hs <- server.Handshake() }()
	if err := client.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-hs; err != nil {
		t.Fatal(err)
	}
	_ = rawS.SetDeadline(time.Time{})
	_ = rawC.SetDeadline(time.Time{})
	return server, client
}

// A TLS session whose peer stopped reading closes without waiting on the
// peer: tls.Conn's Close first writes a close_notify alert, which, with the
// socket's buffers full, waited up to 5 s (its own bound) before the
// socket closed, holding up Close and so the edge's fencing of the node
// behind the write timeout that found it stuck.
func TestTLSSessionWithStuckPeerClosesAtOnce(t *testing.T) {
	old := muxWriteTimeout
	muxWriteTimeout = 200 * time.Millisecond
	t.Cleanup(func() { muxWriteTimeout = old })
	server, _ := tlsPair(t, 4<<10) // the client end reads nothing
	s := muxServer(server)
	defer s.Close()
	st, err := s.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	// The write may fail itself: what does not fit the queue waits for a
	// writer stuck on the peer, and the session closes at the write
	// timeout under it (on a loaded machine, before the queue took it all).
	_, _ = st.Write(make([]byte, muxWindow))
	select {
	case <-s.CloseChan():
	case <-time.After(waitLong):
		t.Fatal("the session to a peer that reads nothing did not close at the write timeout")
	}
	start := time.Now()
	closed := make(chan struct{})
	// Owner: the test; ends when Close returns.
	go func() { _ = s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(2 * waitLong):
		t.Fatal("Close did not return")
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("Close of the failed session took %v: it waited on the peer", el)
	}
}

// A peer that reads steadily but slower than a batch can cross in
// muxWriteTimeout (a node on a slow uplink, a lossy WAN) is not dropped
// as one that stopped reading: the timeout bounds a write making no
// progress, not how long a large batch takes. The session used to write
// each batch (up to muxMaxPending of data) in one write under one
// timeout, so a peer reading under muxMaxPending/muxWriteTimeout bytes a
// second (100 KiB/s by default) lost its session under load. Over TLS,
// whose connection is broken by a write that times out, so that a write
// cannot simply be resumed.
func TestSlowReadingPeerIsNotDropped(t *testing.T) {
	old := muxWriteTimeout
	muxWriteTimeout = 1500 * time.Millisecond
	t.Cleanup(func() { muxWriteTimeout = old })
	server, client := tlsPair(t, 64<<10)
	s := muxServer(server)
	defer s.Close()
	const streams = 6
	want := streams * muxWindow
	got := make(chan int, 1)
	// Owner: the test; ends when the session's connection closes.
	go func() {
		n, buf := 0, make([]byte, 4<<10)
		for {
			m, err := client.Read(buf)
			n += m
			if err != nil {
				got <- n
				return
			}
			// At most 400 KiB/s: a chunk takes about 0.2 s, a batch of
			// muxMaxPending over 2 s.
			time.Sleep(10 * time.Millisecond)
		}
	}()
	for range streams {
		st, err := s.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		_ = st.SetWriteDeadline(time.Now().Add(20 * waitLong))
		if _, err := st.Write(make([]byte, muxWindow)); err != nil {
			t.Fatalf("write to a peer that reads: %v", err)
		}
	}
	// Everything is queued; the session must still be open once the
	// peer has read it all.
	mark := s.queuedMark()
	if err := s.waitWritten(mark, time.Now().Add(20*waitLong)); err != nil {
		t.Fatalf("%d bytes for a peer reading steadily: %v", want, err)
	}
	if s.IsClosed() {
		t.Fatalf("session closed: %v", s.err())
	}
	_ = s.Close()
	if n := <-got; n < want {
		t.Fatalf("peer read %d bytes, want at least %d", n, want)
	}
}
