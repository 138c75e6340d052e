package nodewire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tcpPair returns both ends of a real loopback TCP connection.
func tcpPair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() { // Owner: the test; ends with the one Accept.
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = await(t, accepted, "the connection accepted")
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// muxPair starts a client and a server session over loopback TCP.
func muxPair(t *testing.T) (client, server *muxSession) {
	t.Helper()
	c, s := tcpPair(t)
	client, server = muxClient(c), muxServer(s)
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func acceptWithin(t *testing.T, s *muxSession) *muxStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	st, err := s.AcceptStreamWithContext(ctx)
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	return st
}

type rawFrame struct {
	typ     byte
	flags   uint16
	id      uint32
	length  uint32
	payload []byte
}

func readRawFrame(t *testing.T, r io.Reader) rawFrame {
	t.Helper()
	var hdr [muxHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		t.Fatalf("read frame header: %v", err)
	}
	if hdr[0] != muxVersion {
		t.Fatalf("version %d", hdr[0])
	}
	f := rawFrame{typ: hdr[1], flags: binary.BigEndian.Uint16(hdr[2:4]), id: binary.BigEndian.Uint32(hdr[4:8]), length: binary.BigEndian.Uint32(hdr[8:12])}
	if f.typ == muxTypeData {
		f.payload = make([]byte, f.length)
		if _, err := io.ReadFull(r, f.payload); err != nil {
			t.Fatalf("read payload: %v", err)
		}
	}
	return f
}

func rawHeader(typ byte, flags uint16, id, length uint32) []byte {
	b := make([]byte, muxHeaderLen)
	putHeader(b, typ, flags, id, length)
	return b
}

// A stream opens with its first data frame: no separate SYN and no ACK, so
// a request (open, data, half-close) costs the peer no extra frames.
func TestMuxOpenRidesOnFirstFrame(t *testing.T) {
	c, s := tcpPair(t)
	client := muxClient(c)
	defer client.Close()

	st, err := client.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if st.StreamID() != 0 {
		t.Fatalf("id %d before anything was sent", st.StreamID())
	}
	if _, err := st.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	_ = s.SetReadDeadline(time.Now().Add(waitLong))
	br := bufio.NewReader(s)
	f := readRawFrame(t, br)
	if f.typ != muxTypeData || f.flags != flagSYN || f.id != 1 || string(f.payload) != "hello" {
		t.Fatalf("first frame = %+v, want data SYN id 1 %q", f, "hello")
	}
	if st.StreamID() != 1 {
		t.Fatalf("client stream id %d, want 1 (the dialing side uses odd ids)", st.StreamID())
	}
	f = readRawFrame(t, br)
	if f.typ != muxTypeData || f.flags != flagFIN || f.id != 1 || f.length != 0 {
		t.Fatalf("second frame = %+v, want an empty data FIN on id 1", f)
	}
	if _, err := s.Write(rawHeader(muxTypeData, flagFIN, 1, 0)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "stream forgotten after FIN both ways", func() bool { return client.NumStreams() == 0 })
}

// Streams first written in another order than opened still reach the peer
// with increasing ids (the id is given when the SYN is queued).
func TestMuxIDsFollowFirstWrite(t *testing.T) {
	client, server := muxPair(t)
	a, _ := server.OpenStream()
	b, _ := server.OpenStream()
	if _, err := b.Write([]byte("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if b.StreamID() != 2 || a.StreamID() != 4 {
		t.Fatalf("ids b=%d a=%d, want 2 and 4", b.StreamID(), a.StreamID())
	}
	for _, want := range []string{"b", "a"} {
		st := acceptWithin(t, client)
		buf := make([]byte, 1)
		if _, err := io.ReadFull(st, buf); err != nil || string(buf) != want {
			t.Fatalf("read %q, %v; want %q", buf, err, want)
		}
	}
	if client.IsClosed() || server.IsClosed() {
		t.Fatal("session closed")
	}
}

// Flow control: a writer whose peer does not read stops at exactly the
// stream window; reading grants credit and the whole transfer arrives
// intact and in order.
func TestMuxWindow(t *testing.T) {
	client, server := muxPair(t)
	w, _ := client.OpenStream()
	data := make([]byte, 4*muxWindow+12345)
	for i := range data {
		data[i] = byte(i * 7)
	}
	_ = w.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
	n, err := w.Write(data)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a reader that never reads: n=%d err=%v, want a deadline error", n, err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("deadline error %v is not a net.Error timeout", err)
	}
	if n != muxWindow {
		t.Fatalf("wrote %d bytes before blocking, want the window %d", n, muxWindow)
	}
	_ = w.SetWriteDeadline(time.Time{})
	r := acceptWithin(t, server)
	done := make(chan error, 1)
	go func() { // Owner: the test; ends when the rest is written.
		_, err := w.Write(data[n:])
		if err == nil {
			err = w.Close()
		}
		done <- err
	}()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("received %d bytes, want %d identical", len(got), len(data))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Reset ends both directions on both sides and forgets the stream.
func TestMuxReset(t *testing.T) {
	client, server := muxPair(t)
	a, _ := server.OpenStream()
	if _, err := a.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b := acceptWithin(t, client)
	readErr := make(chan error, 1)
	go func() { // Owner: the test; ends when the reset arrives.
		buf := make([]byte, 8)
		_, _ = b.Read(buf) // "x"
		_, err := b.Read(buf)
		readErr <- err
	}()
	a.Reset()
	select {
	case err := <-readErr:
		if !errors.Is(err, errStreamReset) {
			t.Fatalf("peer read after reset: %v, want errStreamReset", err)
		}
	case <-time.After(waitLong):
		t.Fatal("peer read still blocked after reset")
	}
	if _, err := b.Write([]byte("y")); !errors.Is(err, errStreamReset) {
		t.Fatalf("peer write after reset: %v", err)
	}
	if _, err := a.Write([]byte("y")); !errors.Is(err, errStreamReset) {
		t.Fatalf("write after own reset: %v", err)
	}
	waitFor(t, "both sides forget the stream", func() bool { return client.NumStreams() == 0 && server.NumStreams() == 0 })
}

// Deadlines: a blocked read ends with a timeout error, and a deadline set
// while a read is blocked applies to it.
func TestMuxReadDeadline(t *testing.T) {
	client, server := muxPair(t)
	a, _ := server.OpenStream()
	_, _ = a.Write(nil) // announce
	b := acceptWithin(t, client)
	errc := make(chan error, 1)
	go func() { // Owner: the test; ends at the deadline set below.
		_, err := b.Read(make([]byte, 1))
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	_ = b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	select {
	case err := <-errc:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read: %v, want a deadline error", err)
		}
	case <-time.After(waitLong):
		t.Fatal("deadline set during a blocked read was ignored")
	}
	_ = b.SetReadDeadline(time.Time{})
	if _, err := a.Write([]byte("z")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := b.Read(buf); err != nil || buf[0] != 'z' {
		t.Fatalf("read after clearing the deadline: %q %v", buf, err)
	}
}

// Closing the session fails every stream, including one opened here and
// never written (which the session table does not hold yet).
func TestMuxCloseFailsStreams(t *testing.T) {
	client, server := muxPair(t)
	unsent, _ := server.OpenStream()
	sent, _ := server.OpenStream()
	_, _ = sent.Write([]byte("q"))
	errs := make(chan error, 2)
	for _, st := range []*muxStream{unsent, sent} {
		go func() { // Owner: the test; ends when the session closes.
			_, err := st.Read(make([]byte, 1))
			errs <- err
		}()
	}
	time.Sleep(20 * time.Millisecond)
	_ = client.Close()
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, errSessionClosed) {
				t.Fatalf("read on a closed session: %v", err)
			}
		case <-time.After(waitLong):
			t.Fatal("read still blocked after the session closed")
		}
	}
	waitFor(t, "server session closed by the peer", server.IsClosed)
	if _, err := server.OpenStream(); err == nil {
		t.Fatal("OpenStream on a closed session succeeded")
	}
}

// A peer breaking the framing closes the session with ErrProtocol.
func TestMuxProtocolViolations(t *testing.T) {
	overWindow := rawHeader(muxTypeData, flagSYN, 1, 0)
	for sent := 0; sent <= muxWindow; sent += muxMaxData {
		overWindow = append(overWindow, rawHeader(muxTypeData, 0, 1, muxMaxData)...)
		overWindow = append(overWindow, make([]byte, muxMaxData)...)
	}
	// Exactly the window, then one byte more.
	oneOver := rawHeader(muxTypeData, flagSYN, 1, 0)
	for sent := 0; sent < muxWindow; sent += muxMaxData {
		oneOver = append(oneOver, rawHeader(muxTypeData, 0, 1, muxMaxData)...)
		oneOver = append(oneOver, make([]byte, muxMaxData)...)
	}
	oneOver = append(oneOver, append(rawHeader(muxTypeData, 0, 1, 1), 'x')...)
	cases := []struct {
		name  string
		bytes []byte
	}{
		{"bad version", append([]byte{9}, rawHeader(muxTypeData, flagSYN, 1, 0)[1:]...)},
		{"unknown type", rawHeader(7, 0, 1, 0)},
		{"oversize data frame", rawHeader(muxTypeData, flagSYN, 1, muxMaxData+1)},
		{"data before open", rawHeader(muxTypeData, 0, 5, 1)},
		{"server-side id opened by the client", rawHeader(muxTypeData, flagSYN, 2, 0)},
		{"reused id", append(rawHeader(muxTypeData, flagSYN, 3, 0), rawHeader(muxTypeData, flagSYN, 3, 0)...)},
		{"data after FIN", append(rawHeader(muxTypeData, flagSYN|flagFIN, 1, 0), append(rawHeader(muxTypeData, 0, 1, 1), 'x')...)},
		{"beyond the window", overWindow},
		{"one byte beyond the window", oneOver},
		{"window overflow", append(rawHeader(muxTypeData, flagSYN, 1, 0), rawHeader(muxTypeWindow, 0, 1, 1<<31)...)},
		// A grant taking the send window one past 1<<31.
		{"window overflow by one", append(rawHeader(muxTypeData, flagSYN, 1, 0), rawHeader(muxTypeWindow, 0, 1, 1<<31-muxWindow+1)...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, s := tcpPair(t)
			server := muxServer(s)
			defer server.Close()
			// Owner: the test; the session accepts into its backlog, so
			// nothing needs to read the streams.
			if _, err := c.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			select {
			case <-server.CloseChan():
			case <-time.After(waitLong):
				t.Fatal("session survived a protocol violation")
			}
			if !errors.Is(server.err(), ErrProtocol) {
				t.Fatalf("close cause %v, want ErrProtocol", server.err())
			}
		})
	}
}

// Frames for a stream this side already reset are dropped, not errors.
func TestMuxLateFramesAfterReset(t *testing.T) {
	c, s := tcpPair(t)
	server := muxServer(s)
	defer server.Close()
	if _, err := c.Write(append(rawHeader(muxTypeData, flagSYN, 1, 1), 'a')); err != nil {
		t.Fatal(err)
	}
	st := acceptWithin(t, server)
	st.Reset()
	_ = c.SetReadDeadline(time.Now().Add(waitLong))
	if f := readRawFrame(t, c); f.flags != flagRST || f.id != 1 {
		t.Fatalf("got %+v, want RST for stream 1", f)
	}
	late := append(rawHeader(muxTypeData, 0, 1, 1), 'b')
	late = append(late, rawHeader(muxTypeWindow, 0, 1, 100)...)
	late = append(late, append(rawHeader(muxTypeData, flagSYN, 3, 1), 'c')...)
	if _, err := c.Write(late); err != nil {
		t.Fatal(err)
	}
	next := acceptWithin(t, server)
	buf := make([]byte, 1)
	if _, err := io.ReadFull(next, buf); err != nil || buf[0] != 'c' {
		t.Fatalf("next stream read %q %v", buf, err)
	}
	if server.IsClosed() {
		t.Fatalf("session closed: %v", server.err())
	}
}

func BenchmarkMuxRequestResponse(b *testing.B) {
	c1, c2 := tcpPair(b)
	client, server := muxClient(c1), muxServer(c2)
	defer client.Close()
	defer server.Close()
	req, resp := make([]byte, 300), make([]byte, 1000)
	// Owner: the benchmark; ends when the session closes.
	go func() {
		buf := make([]byte, 2048)
		for {
			st, err := client.AcceptStreamWithContext(context.Background())
			if err != nil {
				return
			}
			if _, err := io.ReadFull(st, buf[:len(req)]); err != nil {
				return
			}
			_, _ = st.Write(resp)
			_ = st.Close()
		}
	}()
	buf := make([]byte, 2048)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		st, err := server.OpenStream()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(st, buf[:len(resp)]); err != nil {
			b.Fatal(err)
		}
		if _, err := st.Read(buf); err != io.EOF {
			b.Fatal(err)
		}
		_ = st.Close()
	}
}

// FuzzMuxSession feeds arbitrary bytes to a session as its peer's side of
// the connection. Whatever arrives, the session must not panic, must not
// grow a buffer beyond its windows, and must close once the input ends.
func FuzzMuxSession(f *testing.F) {
	open := append(rawHeader(muxTypeData, flagSYN, 1, 3), "abc"...)
	f.Add(open)
	f.Add(append(append([]byte{}, open...), rawHeader(muxTypeData, flagFIN, 1, 0)...))
	f.Add(append(append([]byte{}, open...), rawHeader(muxTypeData, flagRST, 1, 0)...))
	f.Add(append(append([]byte{}, open...), rawHeader(muxTypeWindow, 0, 1, 4096)...))
	f.Add(append(append([]byte{}, open...), append(rawHeader(muxTypeData, flagSYN|flagFIN, 3, 1), 'z')...))
	f.Add(rawHeader(muxTypeData, flagSYN, 2, 0))
	f.Add([]byte{1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) { fuzzSession(t, muxServer, data) })
}

// fuzzSession feeds data, as the peer, to a session started by start over
// a pipe: the session never panics, never buffers a stream beyond its
// window, and ends when the peer hangs up.
func fuzzSession(t *testing.T, start func(net.Conn) *muxSession, data []byte) {
	c, s := net.Pipe()
	sess := start(s)
	drained := make(chan struct{})
	go func() { // Owner: the fuzz case; ends when c is closed below.
		defer close(drained)
		_, _ = io.Copy(io.Discard, c)
	}()
	readers := make(chan struct{})
	go func() { // Owner: the fuzz case; ends when the session closes.
		defer close(readers)
		for {
			st, err := sess.AcceptStreamWithContext(context.Background())
			if err != nil {
				return
			}
			buf := make([]byte, 4096)
			for {
				st.mu.Lock()
				buffered := len(st.rbuf) - st.roff
				st.mu.Unlock()
				if buffered > muxWindow {
					t.Errorf("stream %d buffers %d bytes, beyond its window", st.StreamID(), buffered)
				}
				if _, err := st.Read(buf); err != nil {
					break
				}
			}
		}
	}()
	_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	_, _ = c.Write(data)
	_ = c.Close()
	select {
	case <-sess.CloseChan():
	case <-time.After(2 * time.Second):
		t.Fatal("session still open after its peer closed")
	}
	_ = sess.Close()
	await(t, drained, "the reader to drain")
	await(t, readers, "the stream acceptor to end after the session closed")
}

// Finished exchanges leave nothing behind: after many request/response
// exchanges, closed both ways, neither side holds a stream.
func TestMuxForgetsFinishedStreams(t *testing.T) {
	client, server := muxPair(t)
	done := make(chan struct{})
	go func() { // Owner: the test; ends when the session closes.
		defer close(done)
		for {
			st, err := client.AcceptStreamWithContext(context.Background())
			if err != nil {
				return
			}
			b, _ := io.ReadAll(st)
			_, _ = st.Write(b)
			_ = st.Close()
		}
	}()
	for i := range 200 {
		st, _ := server.OpenStream()
		msg := []byte(fmt.Sprint("request ", i))
		if _, err := st.Write(msg); err != nil {
			t.Fatal(err)
		}
		_ = st.Close()
		got, err := io.ReadAll(st)
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("exchange %d: %q %v", i, got, err)
		}
	}
	waitFor(t, "no streams left", func() bool { return client.NumStreams() == 0 && server.NumStreams() == 0 })
	_ = server.Close()
	await(t, done, "the goroutine to end after Close")
}

// writeCountConn counts Write calls on a connection.
type writeCountConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *writeCountConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestSchedMuxCoalescesReadiedStreams: frames from streams readied
// together leave in a few writes, not one write each. On one P the waking
// stream would otherwise run the writer next (runnext) for every frame
// (64 writes); the writer's yield lets the others queue first. The race
// detector randomizes runnext, so `make test` runs this without -race.
func TestSchedMuxCoalescesReadiedStreams(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector shuffles the run queue; make test runs this test without -race")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	c, s := tcpPair(t)
	cc := &writeCountConn{Conn: c}
	client := muxClient(cc)
	defer client.Close()
	server := muxServer(s)
	defer server.Close()

	const n = 64
	streams := make([]*muxStream, n)
	for i := range streams {
		st, err := client.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Write([]byte("open")); err != nil {
			t.Fatal(err)
		}
		streams[i] = st
		acceptWithin(t, server)
	}
	waitFor(t, "opening frames written", func() bool { return client.written.Load() == client.queuedMark() })
	before := cc.writes.Load()

	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, st := range streams {
		wg.Add(1)
		// Owner: the test; each writes one frame and ends.
		go func() {
			defer wg.Done()
			<-start
			_, _ = st.Write([]byte("chunk"))
		}()
	}
	time.Sleep(10 * time.Millisecond) // every writer parked on start
	close(start)
	awaitGroup(t, &wg, "the writers to end")
	waitFor(t, "chunks written", func() bool { return client.written.Load() == client.queuedMark() })
	if w := cc.writes.Load() - before; w > n/4 {
		t.Fatalf("%d frames from streams readied together took %d writes, want at most %d", n, w, n/4)
	} else {
		t.Logf("%d frames, %d writes", n, w)
	}
}

// A burst of opens larger than the accept backlog waits for the acceptor
// instead of being refused; only a backlog that stays full past the wait
// refuses (resets) the stream that found it full.
func TestMuxAcceptBacklogWaits(t *testing.T) {
	defer func(d time.Duration) { muxAcceptWait = d }(muxAcceptWait)
	muxAcceptWait = 300 * time.Millisecond
	c, s := tcpPair(t)
	server := muxServer(s)
	defer server.Close()

	// Twice the backlog, opened in one write while nothing accepts.
	const opens = 2 * muxAcceptBacklog
	var burst []byte
	for i := 0; i < opens; i++ {
		burst = append(burst, rawHeader(muxTypeData, flagSYN, uint32(2*i+1), 1)...)
		burst = append(burst, 'x')
	}
	if _, err := c.Write(burst); err != nil {
		t.Fatal(err)
	}
	time.Sleep(muxAcceptWait / 3) // the backlog fills; the reader waits
	for i := 0; i < opens; i++ {
		st := acceptWithin(t, server)
		if want := uint32(2*i + 1); st.StreamID() != want {
			t.Fatalf("accepted stream %d, want %d", st.StreamID(), want)
		}
		buf := make([]byte, 1)
		if n, err := st.Read(buf); n != 1 || err != nil {
			t.Fatalf("stream %d: read %d, %v", st.StreamID(), n, err)
		}
	}

	// Nothing accepts now: the stream after a full backlog is reset once
	// the wait is over, and the session lives on.
	burst = burst[:0]
	next := uint32(2*opens + 1)
	for i := 0; i <= muxAcceptBacklog; i++ {
		burst = append(burst, rawHeader(muxTypeData, flagSYN, next+uint32(2*i), 0)...)
	}
	start := time.Now()
	if _, err := c.Write(burst); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(waitLong))
	refused := next + 2*muxAcceptBacklog
	for {
		f := readRawFrame(t, c)
		if f.flags&flagRST == 0 {
			continue // window grants for the streams read above
		}
		if f.id != refused {
			t.Fatalf("stream %d reset, want only %d", f.id, refused)
		}
		break
	}
	if waited := time.Since(start); waited < muxAcceptWait*9/10 {
		t.Errorf("refused after %s, before the accept wait (%s)", waited, muxAcceptWait)
	}
	if server.IsClosed() {
		t.Fatalf("session closed: %v", server.err())
	}
}
