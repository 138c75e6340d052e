package nodewire

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// After registering, a node may open only its control stream: every other
// stream it opens is reset on arrival and nothing of it is buffered, however
// many it opens and however much it sends.
func TestEdgeResetsNodeOpenedStreams(t *testing.T) {
	h := newFakeHandler()
	ts := startServer(t, h, ServerConfig{})
	cc, sc := readyPair(t, ts, "n1")
	payload := make([]byte, muxMaxData)
	var refused int
	for range 2000 {
		st, err := cc.OpenStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_ = st.SetWriteDeadline(time.Now().Add(time.Second))
		// The first frame rides with the open; the reset comes back.
		if _, err := st.s.Write(payload); err != nil {
			refused++
		}
		st.s.Reset()
	}
	sess := sc.sess.Load()
	waitFor(t, "the edge to hold no node-opened stream", func() bool { return sess.NumStreams() <= 1 })
	// The control stream stays open and the node's heartbeats on it are
	// buffered until the edge's control reader takes them, so the count
	// may be briefly above zero; bytes of refused streams would keep it
	// there for good.
	waitFor(t, "the edge to buffer nothing of streams it never accepts", func() bool { return sess.buffered.Load() == 0 })
	if cc.IsClosed() || sc.IsClosed() {
		t.Fatalf("the session ended: %v / %v", cc.Err(), sc.Err())
	}
}

// A send that fails after its window was debited gives the credit back:
// the stream's window stays exact for the bytes that were queued.
func TestWindowCreditedBackOnFailedSend(t *testing.T) {
	c, s := tcpPair(t)
	client := muxClient(c)
	t.Cleanup(func() { _ = client.Close() })
	_ = s // the peer never reads: its socket and then our queue fill up
	payload := make([]byte, muxWindow)
	var failed *muxStream
	var queued int
	for i := 0; i < 64 && failed == nil; i++ {
		st, _ := client.OpenStream()
		_ = st.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
		n, err := st.Write(payload)
		if err != nil {
			failed, queued = st, n
		}
	}
	if failed == nil {
		t.Fatal("no send ever failed against a peer that never reads")
	}
	failed.mu.Lock()
	win := failed.sendWin
	failed.mu.Unlock()
	if int(win) != muxWindow-queued {
		t.Fatalf("window %d after a failed send of which %d bytes were queued, want %d", win, queued, muxWindow-queued)
	}
}

// A peer that opens streams the other side resets, and never reads the
// resets, is dropped: once the queued control frames pass their bound, or
// once the writer has been stuck past its write deadline, whichever comes
// first.
func TestControlQueueBounded(t *testing.T) {
	oldPending, oldTimeout := muxMaxControlPending, muxWriteTimeout
	muxMaxControlPending, muxWriteTimeout = 64<<10, 2*time.Second
	t.Cleanup(func() { muxMaxControlPending, muxWriteTimeout = oldPending, oldTimeout })
	c, s := tcpPair(t)
	_ = s.(*net.TCPConn).SetWriteBuffer(4096)
	// The edge side: a node may open one stream, so every other open is
	// answered with a reset.
	edge := newMuxSession(s, false, 1)
	t.Cleanup(func() { _ = edge.Close() })
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	done := make(chan struct{})
	// Owner: the test; ends when the edge closes the connection.
	go func() {
		defer close(done)
		// Opens in batches, so that filling every socket buffer between
		// the two ends takes little time.
		for id := uint32(1); ; {
			var batch []byte
			for range 4096 {
				batch = append(append(batch, rawHeader(muxTypeData, flagSYN, id, 1)...), 'x')
				id += 2
			}
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(batch); err != nil {
				return
			}
		}
	}()
	select {
	case <-edge.CloseChan():
	case <-time.After(20 * time.Second):
		t.Fatal("a peer that never reads its resets was never dropped")
	}
	if err := edge.err(); !errors.Is(err, ErrProtocol) && !errors.Is(err, errTimeout) {
		t.Fatalf("closed for %v", err)
	}
	t.Logf("dropped: %v", edge.err())
	_ = c.Close()
	await(t, done, "the raw peer's reader to end after Close")
}

// The control queue's own bound drops a peer that never reads its resets
// even when the writer's write timeout is far away: the queue does not
// grow until then.
func TestControlQueueBoundAlone(t *testing.T) {
	oldPending, oldTimeout := muxMaxControlPending, muxWriteTimeout
	muxMaxControlPending, muxWriteTimeout = 64<<10, time.Hour
	t.Cleanup(func() { muxMaxControlPending, muxWriteTimeout = oldPending, oldTimeout })
	c, s := tcpPair(t)
	_ = s.(*net.TCPConn).SetWriteBuffer(4096)
	edge := newMuxSession(s, false, 1)
	t.Cleanup(func() { _ = edge.Close() })
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	done := make(chan struct{})
	// Owner: the test; ends when the edge closes the connection.
	go func() {
		defer close(done)
		for id := uint32(1); ; {
			var batch []byte
			for range 4096 {
				batch = append(batch, rawHeader(muxTypeData, flagSYN, id, 0)...)
				id += 2
			}
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(batch); err != nil {
				return
			}
		}
	}()
	select {
	case <-edge.CloseChan():
	case <-time.After(20 * time.Second):
		t.Fatal("a peer that never reads its resets was never dropped")
	}
	if err := edge.err(); !errors.Is(err, ErrProtocol) {
		t.Fatalf("closed for %v, want ErrProtocol (the control queue's bound)", err)
	}
	_ = c.Close()
	await(t, done, "the raw peer's reader to end after Close")
}

// A stream reset before its first write is never announced: the write
// fails and the peer sees no stream; done concurrently, every race ends
// with both sides holding no stream.
func TestResetBeforeFirstWrite(t *testing.T) {
	client, server := muxPair(t)
	st, _ := client.OpenStream()
	st.Reset()
	if _, err := st.Write([]byte("late")); err == nil {
		t.Fatal("a write after Reset succeeded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if got, err := server.AcceptStreamWithContext(ctx); err == nil {
		t.Fatalf("the peer saw stream %d of a reset stream", got.StreamID())
	}
	// Racing Reset and the first Write.
	var wg sync.WaitGroup
	for range 200 {
		st, _ := client.OpenStream()
		wg.Add(2)
		go func() { defer wg.Done(); _, _ = st.Write([]byte("x")) }()
		go func() { defer wg.Done(); st.Reset() }()
	}
	awaitGroup(t, &wg, "the racing writes and resets to end")
	// Owner: the test; ends when the server session closes at cleanup.
	go func() {
		for {
			st, err := server.AcceptStreamWithContext(context.Background())
			if err != nil {
				return
			}
			st.Reset()
		}
	}()
	waitFor(t, "both sides to drop every raced stream", func() bool {
		return client.NumStreams() == 0 && server.NumStreams() == 0
	})
}

// The session bounds what it buffers across streams nobody reads: beyond
// the bound the overflowing stream is reset, not buffered.
func TestSessionBufferBound(t *testing.T) {
	client, server := muxPair(t)
	payload := make([]byte, muxWindow)
	streams := muxMaxBuffered/muxWindow + 8
	for range streams {
		st, err := client.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		_ = st.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, _ = st.Write(payload)
	}
	waitFor(t, "the server to take every frame", func() bool {
		return server.buffered.Load() >= muxMaxBuffered-muxWindow
	})
	time.Sleep(100 * time.Millisecond)
	if b := server.buffered.Load(); b > muxMaxBuffered {
		t.Fatalf("server buffers %d bytes, bound %d", b, muxMaxBuffered)
	}
}

// A reset that arrives after the peer's FIN keeps what the peer sent
// readable: the tail of an answer a slow consumer has not read yet is not
// lost when the peer gives up on the stream.
func TestResetAfterFINKeepsData(t *testing.T) {
	client, server := muxPair(t)
	st, _ := client.OpenStream()
	if _, err := st.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	peer := acceptWithin(t, server)
	answer := bytes.Repeat([]byte("a"), 100<<10)
	if _, err := peer.Write(answer); err != nil {
		t.Fatal(err)
	}
	_ = peer.Close() // FIN
	peer.Reset()     // and then gives up on it
	waitFor(t, "the reset to arrive", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.err != nil
	})
	got, err := io.ReadAll(st)
	if len(got) != len(answer) {
		t.Fatalf("read %d of %d bytes after the reset (%v)", len(got), len(answer), err)
	}
}

// A reader that stays behind a fast writer for a long answer (it never
// drains the stream) keeps a buffer bounded by the window, not by the
// answer: the bytes it has read are dropped as new ones arrive. Before,
// they stayed in the buffer until it drained: this 4.2 MB answer, read
// 56 KiB behind, held a 5.4 MB buffer.
func TestLaggingReaderBufferBounded(t *testing.T) {
	client, server := muxPair(t)
	st, _ := client.OpenStream()
	if _, err := st.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	peer := acceptWithin(t, server)
	unread := func() int {
		st.mu.Lock()
		defer st.mu.Unlock()
		return len(st.rbuf) - st.roff
	}
	const event = 300 // one streamed chunk's frame
	var next byte
	var want, got []byte
	send := func(n int) { // n bytes as events, within the window
		t.Helper()
		_ = peer.SetWriteDeadline(time.Now().Add(5 * time.Second))
		for n > 0 {
			p := bytes.Repeat([]byte{next}, min(event, n))
			next++
			want = append(want, p...)
			if _, err := peer.Write(p); err != nil {
				t.Fatal(err)
			}
			n -= len(p)
		}
	}
	send(muxWindow)
	waitFor(t, "the window's bytes to arrive", func() bool { return unread() == muxWindow })
	const step = 200 << 10 // read this much, leaving the rest behind
	maxCap := 0
	for range 20 {
		buf := make([]byte, step)
		if _, err := io.ReadFull(st, buf); err != nil {
			t.Fatal(err)
		}
		got = append(got, buf...)
		behind := unread()
		send(step)
		waitFor(t, "the next bytes to arrive", func() bool { return unread() == behind+step })
		st.mu.Lock()
		maxCap = max(maxCap, cap(st.rbuf))
		st.mu.Unlock()
	}
	if maxCap > 2*muxWindow {
		t.Fatalf("a reader %d bytes behind held a %d-byte buffer (bound %d)", muxWindow-step, maxCap, 2*muxWindow)
	}
	_ = peer.Close()
	rest, err := io.ReadAll(st)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, rest...)
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want %d in order", len(got), len(want))
	}
}
