package nodewire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func runRequest(id string) *iop.Envelope {
	return &iop.Envelope{Body: &iop.Envelope_RunRequest{RunRequest: &iop.RunRequest{RunId: id, Adapter: "a", Target: "t"}}}
}

func runEvent(id string, seq uint64, delta string) *iop.Envelope {
	return &iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: &iop.RunEvent{
		RunId: id, Sequence: seq, Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: delta,
	}}}
}

// serveClient runs cc.Serve(ctx, h) and returns a channel with its result.
// Cleanup closes cc and waits for Serve.
func serveClient(t *testing.T, ctx context.Context, cc *ClientConn, h StreamHandler) <-chan error {
	t.Helper()
	res := make(chan error, 1)
	done := make(chan struct{})
	// Owner: the test; Serve returns when cc closes (Cleanup below).
	go func() { defer close(done); res <- cc.Serve(ctx, h) }()
	t.Cleanup(func() {
		_ = cc.Close()
		select {
		case <-done:
		case <-time.After(waitLong):
			t.Errorf("ClientConn.Serve did not return within %v of Close", waitLong)
		}
	})
	return res
}

func TestStreamRequestResponse(t *testing.T) {
	ts := startServer(t, newFakeHandler(), ServerConfig{})
	cc, sc := readyPair(t, ts, "node-1")

	type result struct {
		first  *iop.Envelope
		eofErr error
	}
	handled := make(chan result, 1)
	serveClient(t, context.Background(), cc, func(ctx context.Context, st *Stream, first *iop.Envelope) {
		defer st.CloseWrite()
		// The Edge half-closed after its request: the Node reads io.EOF and
		// can still answer.
		_, err := st.Recv()
		for i := uint64(1); i <= 3; i++ {
			if err := st.Send(runEvent(first.GetRunRequest().GetRunId(), i, fmt.Sprint("d", i))); err != nil {
				t.Errorf("handler Send: %v", err)
			}
		}
		handled <- result{first, err}
	})

	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	st, err := sc.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(runRequest("run-1")); err != nil {
		t.Fatal(err)
	}
	if st.ID() == 0 {
		t.Fatal("stream ID 0 after its first frame")
	}
	if err := st.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseWrite(); err != nil {
		t.Fatalf("second CloseWrite: %v", err)
	}
	if err := st.Send(runRequest("late")); err == nil {
		t.Fatal("Send after CloseWrite succeeded")
	}
	for i := uint64(1); i <= 3; i++ {
		env, err := recvWithin(st, waitLong)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if ev := env.GetRunEvent(); ev.GetSequence() != i || ev.GetRunId() != "run-1" {
			t.Fatalf("event %d = %v", i, env)
		}
	}
	if _, err := recvWithin(st, waitLong); err != io.EOF {
		t.Fatalf("after the last event: got %v, want io.EOF", err)
	}
	select {
	case r := <-handled:
		if r.first.GetRunRequest().GetRunId() != "run-1" {
			t.Fatalf("handler first envelope %v", r.first)
		}
		if r.eofErr != io.EOF {
			t.Fatalf("handler Recv after the Edge's CloseWrite: %v, want io.EOF", r.eofErr)
		}
	case <-time.After(waitLong):
		t.Fatal("handler not called")
	}
	if got := sc.Stats().StreamsOpened; got != 1 {
		t.Fatalf("server StreamsOpened = %d, want 1", got)
	}
	if got := cc.Stats().StreamsAccepted; got != 1 {
		t.Fatalf("client StreamsAccepted = %d, want 1", got)
	}
}

// A stream whose reader stalls must not stall any other stream: the mux flow
// control blocks the stalled stream's writer at its window instead of
// buffering without bound or blocking the socket.
func TestStallIsolation(t *testing.T) {
	ts := startServer(t, newFakeHandler(), ServerConfig{})
	cc, sc := readyPair(t, ts, "node-1")

	var (
		aWritten atomic.Int64 // body bytes of completed Sends on A
		aInSend  atomic.Bool  // A's writer is inside Send
		aDone    = make(chan error, 1)
	)
	serveRes := serveClient(t, context.Background(), cc, func(ctx context.Context, st *Stream, first *iop.Envelope) {
		defer st.CloseWrite()
		switch id := first.GetRunRequest().GetRunId(); id {
		case "A": // a large response nobody reads
			body := tunnelBodyEnvelope(MaxBodyChunk)
			for ctx.Err() == nil {
				aInSend.Store(true)
				err := st.Send(body)
				aInSend.Store(false)
				if err != nil {
					aDone <- err
					return
				}
				aWritten.Add(MaxBodyChunk)
			}
			aDone <- ctx.Err()
		case "B": // echo
			for {
				env, err := st.Recv()
				if err != nil {
					return
				}
				if err := st.Send(env); err != nil {
					return
				}
			}
		default:
			t.Errorf("unexpected stream %q", id)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	stA, err := sc.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stB, err := sc.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stA.Send(runRequest("A")); err != nil {
		t.Fatal(err)
	}
	if err := stB.Send(runRequest("B")); err != nil {
		t.Fatal(err)
	}
	// A fills its window (256 KiB) and blocks.
	waitFor(t, "A to fill its window", func() bool { return aWritten.Load() >= 128<<10 && aInSend.Load() })

	const pings = 50
	for i := 0; i < pings; i++ {
		want := fmt.Sprintf("ping-%d", i)
		if err := stB.Send(runEvent("B", uint64(i+1), want)); err != nil {
			t.Fatalf("ping %d: %v", i, err)
		}
		env, err := recvWithin(stB, time.Second)
		if err != nil {
			t.Fatalf("echo %d while A is stalled: %v (server conn %v, client conn %v)", i, err, sc.Err(), cc.Err())
		}
		if got := env.GetRunEvent().GetDelta(); got != want {
			t.Fatalf("echo %d = %q, want %q", i, got, want)
		}
	}

	// A's writer is parked in Send at its flow-control window, not
	// buffering: unchecked, it would have written many MiB during the ping
	// exchange.
	stalledAt := aWritten.Load()
	if stalledAt >= 1<<20 || !aInSend.Load() {
		t.Fatalf("A wrote %d bytes, in Send: %v; want it blocked in Send below 1 MiB", stalledAt, aInSend.Load())
	}
	select {
	case err := <-aDone:
		t.Fatalf("A's writer ended while stalled: %v", err)
	default:
	}

	// Reading A releases its writer: flow control, not a deadlock. 1 MiB
	// is more than A's window holds, so A must resume to deliver it.
	for i := 0; i < (1<<20)/MaxBodyChunk; i++ {
		env, err := recvWithin(stA, waitLong)
		if err != nil {
			t.Fatalf("reading A frame %d: %v (server conn %v, client conn %v)", i, err, sc.Err(), cc.Err())
		}
		if len(env.GetProviderTunnelFrame().GetBody()) != MaxBodyChunk {
			t.Fatalf("A frame %d: %v", i, env.Body)
		}
	}
	waitFor(t, "A to resume", func() bool { return aWritten.Load() > stalledAt })

	// Closing the Node's connection ends A's blocked Send, B's Recv and Serve.
	if err := cc.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-aDone:
		if err == nil {
			t.Fatal("A's Send ended without an error")
		}
	case <-time.After(waitLong):
		t.Fatal("A's writer still blocked after the connection closed")
	}
	select {
	case err := <-serveRes:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Serve = %v, want ErrClosed", err)
		}
	case <-time.After(waitLong):
		t.Fatal("Serve did not return after Close")
	}
}

// Send is safe for concurrent use: frames of concurrent senders never
// interleave, and each sender's frames stay in order.
func TestStreamConcurrentSend(t *testing.T) {
	ts := startServer(t, newFakeHandler(), ServerConfig{})
	cc, sc := readyPair(t, ts, "node-1")

	const senders, perSender = 4, 40
	got := make(chan map[string][]uint64, 1)
	serveClient(t, context.Background(), cc, func(ctx context.Context, st *Stream, first *iop.Envelope) {
		defer st.CloseWrite()
		seqs := map[string][]uint64{}
		for {
			env, err := st.Recv()
			if err != nil {
				if err != io.EOF {
					t.Errorf("handler Recv: %v", err)
				}
				got <- seqs
				return
			}
			f := env.GetProviderTunnelFrame()
			seqs[f.GetRunId()] = append(seqs[f.GetRunId()], f.GetSequence())
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	st, err := sc.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(runRequest("mux")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for s := 0; s < senders; s++ {
		wg.Add(1)
		// Owner: this test (wg).
		go func() {
			defer wg.Done()
			for i := 1; i <= perSender; i++ {
				env := tunnelBodyEnvelope(1 + (s*7919+i*104729)%(3*MaxBodyChunk))
				f := env.GetProviderTunnelFrame()
				f.RunId, f.Sequence = fmt.Sprint("sender-", s), uint64(i)
				if err := st.Send(env); err != nil {
					t.Errorf("sender %d: %v", s, err)
					return
				}
			}
		}()
	}
	awaitGroup(t, &wg, "the senders to end")
	_ = st.CloseWrite()
	select {
	case seqs := <-got:
		if len(seqs) != senders {
			t.Fatalf("frames from %d senders, want %d", len(seqs), senders)
		}
		for id, s := range seqs {
			if len(s) != perSender {
				t.Fatalf("%s: %d frames, want %d", id, len(s), perSender)
			}
			for i, seq := range s {
				if seq != uint64(i+1) {
					t.Fatalf("%s: frame %d has sequence %d", id, i, seq)
				}
			}
		}
	case <-time.After(waitLong):
		t.Fatal("handler did not see the end of the stream")
	}
}

// Abort while another goroutine is blocked in Recv: no data race, the Recv
// returns, the peer sees the half-close, and whatever the peer still sends
// (more than a window) is drained so its writes never block.
func TestAbortWithBlockedRecv(t *testing.T) {
	ts := startServer(t, newFakeHandler(), ServerConfig{})
	cc, sc := readyPair(t, ts, "node-1")

	const tail = 1 << 20 // four windows
	type peerResult struct {
		recvErr error
		sendErr error
	}
	gotFirst := make(chan struct{})
	peer := make(chan peerResult, 1)
	serveClient(t, context.Background(), cc, func(ctx context.Context, st *Stream, first *iop.Envelope) {
		close(gotFirst)
		var r peerResult
		_, r.recvErr = recvWithin(st, waitLong) // the Edge's Abort half-closes
		_ = st.SetWriteDeadline(time.Now().Add(waitLong))
		body := tunnelBodyEnvelope(MaxBodyChunk)
		for sent := 0; sent < tail && r.sendErr == nil; sent += MaxBodyChunk {
			r.sendErr = st.Send(body)
		}
		_ = st.CloseWrite()
		peer <- r
	})

	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	st, err := sc.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(runRequest("run-abort")); err != nil {
		t.Fatal(err)
	}
	recvDone := make(chan error, 1)
	// Owner: this test; the Recv ends when the peer sends or closes.
	go func() {
		_, err := st.Recv()
		recvDone <- err
	}()
	select {
	case <-gotFirst:
	case <-time.After(waitLong):
		t.Fatal("handler not called")
	}

	st.Abort()
	st.Abort() // idempotent
	select {
	case err := <-recvDone:
		// The peer's first tail frame or its close: either ends the Recv.
		if err != nil && err != io.EOF {
			t.Fatalf("blocked Recv after Abort: %v", err)
		}
	case <-time.After(waitLong):
		t.Fatal("Recv still blocked after Abort")
	}
	select {
	case r := <-peer:
		if r.recvErr != io.EOF {
			t.Fatalf("peer Recv after Abort: %v, want io.EOF", r.recvErr)
		}
		if r.sendErr != nil {
			t.Fatalf("peer's %d-byte tail after Abort: %v (server conn %v, client conn %v)", tail, r.sendErr, sc.Err(), cc.Err())
		}
	case <-time.After(waitLong):
		t.Fatalf("peer never finished (server conn %v, client conn %v)", sc.Err(), cc.Err())
	}
	if err := st.Send(runRequest("after-abort")); err == nil {
		t.Fatal("Send after Abort succeeded")
	}
	// The stream is gone from the session once both sides closed.
	waitFor(t, "stream release", func() bool { return sc.Stats().StreamsOpen == 1 })
}

// A Recv blocked when Abort is called returns io.EOF once the peer, seeing
// the half-close, closes too.
func TestAbortPeerCloses(t *testing.T) {
	ts := startServer(t, newFakeHandler(), ServerConfig{})
	cc, sc := readyPair(t, ts, "node-1")

	serveClient(t, context.Background(), cc, func(ctx context.Context, st *Stream, first *iop.Envelope) {
		defer st.CloseWrite()
		for {
			if _, err := st.Recv(); err != nil {
				return
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	st, err := sc.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(runRequest("run-x")); err != nil {
		t.Fatal(err)
	}
	recvDone := make(chan error, 1)
	// Owner: this test; ends at the peer's close.
	go func() {
		_, err := st.Recv()
		recvDone <- err
	}()
	st.Abort()
	select {
	case err := <-recvDone:
		if err != io.EOF {
			t.Fatalf("Recv after Abort: %v, want io.EOF", err)
		}
	case <-time.After(waitLong):
		t.Fatal("Recv still blocked after Abort")
	}
}

// A stream whose opener never arrives is given up by the Node after its
// handshake timeout, without calling the handler.
func TestServeFirstFrameTimeout(t *testing.T) {
	ts := startServer(t, newFakeHandler(), ServerConfig{})
	cc, _ := dial(t, DialConfig{Address: ts.addr, HandshakeTimeout: time.Second}, "node-1")
	sc := recvConn(t, ts.h.registered, "Register")
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := cc.Ready(ctx, "node-1"); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	serveClient(t, context.Background(), cc, func(ctx context.Context, st *Stream, first *iop.Envelope) {
		calls.Add(1)
		_ = st.CloseWrite()
	})

	st, err := sc.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A stream is announced with its first bytes; an empty write announces
	// it without any frame.
	if _, err := st.s.Write(nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := recvWithin(st, waitLong); err != io.EOF {
		t.Fatalf("Recv on a stream the Node gave up: %v, want io.EOF", err)
	}
	if el := time.Since(start); el < 500*time.Millisecond {
		t.Fatalf("Node gave up after %v, before its 1s handshake timeout", el)
	}
	_ = st.CloseWrite()
	if calls.Load() != 0 {
		t.Fatal("handler called for a stream without an opener")
	}
}

func TestConnCloseIdempotent(t *testing.T) {
	h := newFakeHandler()
	ts := startServer(t, h, ServerConfig{})
	cc, sc := readyPair(t, ts, "node-1")

	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 8; i++ {
		wg.Add(1)
		// Owner: this test (wg).
		go func() {
			defer wg.Done()
			<-start
			if err := cc.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}()
	}
	close(start)
	closed := make(chan struct{})
	// Owner: this test; ends when every Close returned.
	go func() { wg.Wait(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(waitLong):
		t.Fatal("concurrent Close calls did not return")
	}
	if err := cc.Close(); err != nil {
		t.Fatalf("Close after Close: %v", err)
	}
	if !errors.Is(cc.Err(), ErrClosed) {
		t.Fatalf("Err = %v, want ErrClosed", cc.Err())
	}
	if _, err := cc.OpenStream(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("OpenStream after Close: %v, want ErrClosed", err)
	}

	// The server side ends on its own; closing it too, concurrently with
	// the server's own close, is harmless and Closed is reported once.
	waitDone(t, sc, waitLong, "server conn")
	var wg2 sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg2.Add(1)
		// Owner: this test (wg2).
		go func() { defer wg2.Done(); _ = sc.Close() }()
	}
	wg2.Wait()
	if sc.Err() == nil {
		t.Fatal("server conn closed without a cause")
	}
	recvClosed(t, h)
	ts.close(t)
	if _, _, n := h.counts(); n != 1 {
		t.Fatalf("Closed called %d times, want 1", n)
	}
}

// Server.Close ends live connections in every phase (ready, pending ready,
// mid-handshake), waits for their handlers and makes Serve return nil.
func TestServerCloseClosesLiveConns(t *testing.T) {
	h := newFakeHandler()
	ts := startServer(t, h, ServerConfig{})
	cc1, sc1 := readyPair(t, ts, "node-1")
	cc2, sc2 := readyPair(t, ts, "node-2")
	pending, _ := dial(t, DialConfig{Address: ts.addr}, "node-3") // accepted, not ready
	sc3 := recvConn(t, h.registered, "Register")
	raw, err := net.Dial("tcp", ts.addr) // mid-handshake: no preface yet
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()

	serveRes := serveClient(t, context.Background(), cc1, func(ctx context.Context, st *Stream, first *iop.Envelope) {
		<-ctx.Done()
		_ = st.CloseWrite()
	})

	ts.close(t) // fails the test unless Close and Serve return in time
	for _, c := range []*Conn{sc1, sc2, sc3, cc1.Conn, cc2.Conn, pending.Conn} {
		waitDone(t, c, waitLong, "connection after Server.Close")
	}
	expectClosedByPeer(t, raw, waitLong)
	select {
	case err := <-serveRes:
		if err == nil {
			t.Fatal("ClientConn.Serve returned nil after the Edge went away")
		}
	case <-time.After(waitLong):
		t.Fatal("ClientConn.Serve did not return after the server closed")
	}
	// Server.Close waited for every handler: all Closed calls are in.
	if regs, readies, closed := h.counts(); regs != 3 || readies != 2 || closed != 3 {
		t.Fatalf("calls: Register %d, Ready %d, Closed %d; want 3, 2, 3", regs, readies, closed)
	}
	seen := map[*Conn]bool{}
	for i := 0; i < 3; i++ {
		seen[recvClosed(t, h).c] = true
	}
	if !seen[sc1] || !seen[sc2] || !seen[sc3] {
		t.Fatal("Closed not reported for every connection")
	}
	if err := ts.srv.Close(); err != nil {
		t.Fatalf("second Server.Close: %v", err)
	}
}

func TestServeAfterClose(t *testing.T) {
	srv := NewServer(ServerConfig{Handler: newFakeHandler()})
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := srv.Serve(ln); err != nil {
		t.Fatalf("Serve after Close = %v, want nil", err)
	}
	if _, err := ln.Accept(); err == nil {
		t.Fatal("Serve after Close left the listener open")
	}
}

// ClientConn.Serve returns when the Edge closes the connection, after every
// stream handler (whose ctx is cancelled) has returned.
func TestClientServeReturnsWhenServerCloses(t *testing.T) {
	h := newFakeHandler()
	ts := startServer(t, h, ServerConfig{})
	cc, sc := readyPair(t, ts, "node-1")

	var handlerReturned atomic.Bool
	started := make(chan struct{})
	res := serveClient(t, context.Background(), cc, func(ctx context.Context, st *Stream, first *iop.Envelope) {
		close(started)
		<-ctx.Done()
		_ = st.CloseWrite()
		handlerReturned.Store(true)
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	st, err := sc.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(runRequest("run-1")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(waitLong):
		t.Fatal("handler not called")
	}

	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-res:
		if err == nil || errors.Is(err, ErrClosed) {
			t.Fatalf("Serve = %v, want the remote close as cause", err)
		}
		if !handlerReturned.Load() {
			t.Fatal("Serve returned before its handler")
		}
	case <-time.After(waitLong):
		t.Fatal("Serve did not return after the server closed the connection")
	}
	waitDone(t, cc.Conn, waitLong, "client conn")
}

// Cancelling Serve's context closes the connection.
func TestClientServeContextCancel(t *testing.T) {
	ts := startServer(t, newFakeHandler(), ServerConfig{})
	cc, sc := readyPair(t, ts, "node-1")
	ctx, cancel := context.WithCancel(context.Background())
	res := serveClient(t, ctx, cc, func(ctx context.Context, st *Stream, first *iop.Envelope) { _ = st.CloseWrite() })
	cancel()
	select {
	case err := <-res:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Serve = %v after its context was cancelled, want context.Canceled", err)
		}
	case <-time.After(waitLong):
		t.Fatal("Serve did not return after its context was cancelled")
	}
	waitDone(t, cc.Conn, waitLong, "client conn after Serve's ctx ended")
	if !errors.Is(cc.Err(), context.Canceled) {
		t.Fatalf("client Err = %v, want context.Canceled", cc.Err())
	}
	waitDone(t, sc, waitLong, "server conn after the client left")
}
