package nodewire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// bodyFrame encodes a tunnel BODY frame with seq and body as wire bytes.
func bodyFrame(t testing.TB, seq uint64, body []byte) []byte {
	t.Helper()
	b, err := AppendFrame(nil, &iop.Envelope{Body: &iop.Envelope_ProviderTunnelFrame{ProviderTunnelFrame: &iop.ProviderTunnelFrame{
		Kind: iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY, Sequence: seq, Body: body,
	}}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func recvBody(t *testing.T, st *Stream) (uint64, []byte) {
	t.Helper()
	env, err := recvWithin(st, waitLong)
	if err != nil {
		t.Fatalf("recv: %v", err)
	}
	f := env.GetProviderTunnelFrame()
	return f.GetSequence(), f.GetBody()
}

// Recv takes frames that arrived whole straight from the stream's receive
// buffer and the rest through a buffered reader; both give the same
// frames, in order, with the same limits, and both return window credit.
func TestStreamRecvWholeAndPartialFrames(t *testing.T) {
	client, server := muxPair(t)
	w, _ := client.OpenStream()
	write := func(b []byte) {
		t.Helper()
		_ = w.SetWriteDeadline(time.Now().Add(waitLong))
		if _, err := w.Write(b); err != nil {
			t.Fatalf("write: %v", err)
		}
	}

	// Three whole frames in one write.
	var batch []byte
	for seq := uint64(1); seq <= 3; seq++ {
		batch = append(batch, bodyFrame(t, seq, []byte(fmt.Sprintf("data: %d\n\n", seq)))...)
	}
	write(batch)
	st := newStream(acceptWithin(t, server), 1<<20)
	for seq := uint64(1); seq <= 3; seq++ {
		got, body := recvBody(t, st)
		if got != seq || string(body) != fmt.Sprintf("data: %d\n\n", seq) {
			t.Fatalf("frame %d: got seq %d body %q", seq, got, body)
		}
		if st.part.active() {
			t.Fatalf("frame %d arrived whole but Recv holds part of a frame", seq)
		}
	}

	// One frame in three pieces: the length prefix split, then the payload.
	f := bodyFrame(t, 4, []byte("data: split\n\n"))
	for _, piece := range [][]byte{f[:2], f[2:7], f[7:]} {
		write(piece)
		time.Sleep(20 * time.Millisecond) // let each piece arrive on its own
	}
	if seq, body := recvBody(t, st); seq != 4 || string(body) != "data: split\n\n" {
		t.Fatalf("split frame: got seq %d body %q", seq, body)
	}

	// Over a window's worth of whole frames: the reader must grant credit
	// back or the writer blocks (the write deadline would fail it).
	body := make([]byte, 16<<10)
	frames := 3 * muxWindow / len(body)
	encoded := make([][]byte, frames)
	for i := range encoded {
		encoded[i] = bodyFrame(t, uint64(100+i), body)
	}
	errc := make(chan error, 1)
	go func() { // Owner: the test; ends when every frame is written or a write fails.
		for _, b := range encoded {
			_ = w.SetWriteDeadline(time.Now().Add(waitLong))
			if _, err := w.Write(b); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for i := range frames {
		if seq, got := recvBody(t, st); seq != uint64(100+i) || len(got) != len(body) {
			t.Fatalf("window frame %d: got seq %d, %d bytes", i, seq, len(got))
		}
	}
	if err := <-errc; err != nil {
		t.Fatalf("writer: %v", err)
	}

	_ = w.Close()

	// A whole frame over the limit is refused as ErrFrameTooLarge.
	small := newStream(openWith(t, client, server, bodyFrame(t, 200, make([]byte, 100))), 64)
	if env, err := recvWithin(small, waitLong); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("frame over the limit: got (%v, %v), want ErrFrameTooLarge", env, err)
	}

	// The peer's FIN after a frame: the frame, then io.EOF.
	last := newStream(openWith(t, client, server, bodyFrame(t, 1, []byte("data: last\n\n"))), 0)
	if seq, body := recvBody(t, last); seq != 1 || string(body) != "data: last\n\n" {
		t.Fatalf("last frame: got seq %d body %q", seq, body)
	}
	if _, err := recvWithin(last, waitLong); !errors.Is(err, io.EOF) {
		t.Fatalf("after FIN: got %v, want io.EOF", err)
	}
}

// openWith opens a stream from client that sends b and its FIN, and
// returns the server's end of it.
func openWith(t *testing.T, client, server *muxSession, b []byte) *muxStream {
	t.Helper()
	w, _ := client.OpenStream()
	_ = w.SetWriteDeadline(time.Now().Add(waitLong))
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	return acceptWithin(t, server)
}

// FuzzStreamRecv feeds arbitrary bytes, cut into arbitrary pieces, to a
// stream and checks that Recv (whole frames straight from the receive
// buffer, the rest through a buffered reader) returns what ReadFrame
// returns over the same bytes in one piece: the same envelopes, in order,
// then the same kind of error.
func FuzzStreamRecv(f *testing.F) {
	two := append(bodyFrame(f, 1, []byte("data: a\n\n")), bodyFrame(f, 2, []byte("data: b\n\n"))...)
	f.Add(two, []byte{0}, uint16(0))
	f.Add(two, []byte{2, 5, 1}, uint16(0))
	f.Add(two, []byte{3}, uint16(8))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 9, 1}, []byte{1}, uint16(0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, []byte{}, uint16(0))
	// A run's events: lent DELTAs between events that are not.
	var run []byte
	for seq, env := range []*iop.Envelope{
		runDeltaEnv(1, "a"), runDeltaEnv(2, "bc"),
		{Body: &iop.Envelope_RunEvent{RunEvent: &iop.RunEvent{RunId: "run_1", Sequence: 3, Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, Output: []byte("out")}}},
		runDeltaEnv(4, "d"),
	} {
		b, err := AppendFrame(run, env, 0)
		if err != nil {
			f.Fatalf("seed frame %d: %v", seq, err)
		}
		run = b
	}
	f.Add(run, []byte{0}, uint16(0))
	f.Add(run, []byte{7, 30, 2}, uint16(0))
	poisonRecvBufsFor(f)
	f.Fuzz(func(t *testing.T, data, sizes []byte, limit uint16) {
		if len(data) > muxWindow {
			return
		}
		maxSize := int(limit) // 0: DefaultMaxFrameSize
		var want []*iop.Envelope
		r := bytes.NewReader(data)
		var wantErr error
		for {
			env, err := ReadFrame(r, maxSize)
			if err != nil {
				wantErr = err
				break
			}
			want = append(want, env)
		}

		c, s := net.Pipe()
		sess := muxServer(s)
		go func() { _, _ = io.Copy(io.Discard, c) }() // Owner: the fuzz case; ends when c is closed below.
		defer func() { sess.Close(); c.Close() }()
		deliverAll := func(ms *muxStream) error {
			for _, p := range splitPieces(data, sizes) {
				if err := ms.deliver(p, 0); err != nil {
					return fmt.Errorf("deliver: %w", err)
				}
			}
			if err := ms.deliver(nil, flagFIN); err != nil {
				return fmt.Errorf("deliver FIN: %w", err)
			}
			return nil
		}
		check := func(name string, recv func() (*iop.Envelope, error)) {
			// What is not lent (envelopes, a lent run event's values) must
			// stay intact while later frames are received (receive
			// buffers are poisoned as they go back).
			kept := map[int]*iop.Envelope{}
			defer func() {
				for i, env := range kept {
					if !proto.Equal(env, want[i]) {
						t.Fatalf("envelope %d changed by later frames: %s %v, ReadFrame %v", i, name, env, want[i])
					}
				}
			}()
			for i := 0; ; i++ {
				env, err := recv()
				if err != nil {
					if i != len(want) {
						t.Fatalf("%s failed after %d envelopes (%v), ReadFrame read %d", name, i, err, len(want))
					}
					if sameErrKind(err, wantErr) {
						return
					}
					t.Fatalf("%s error %v, ReadFrame's %v", name, err, wantErr)
				}
				if i >= len(want) {
					t.Fatalf("%s returned envelope %d, ReadFrame stopped at %d with %v", name, i, len(want), wantErr)
				}
				// Before the next call: what RecvLent lends is valid
				// until then.
				if !proto.Equal(env, want[i]) {
					t.Fatalf("envelope %d: %s %v, ReadFrame %v", i, name, env, want[i])
				}
				if env.GetProviderTunnelFrame().GetKind() != iop.TunnelFrameKind_TUNNEL_FRAME_KIND_BODY {
					kept[i] = keepLent(env)
				}
			}
		}

		// Recv, once every piece is there.
		ms := newMuxStream(sess, 1)
		if err := deliverAll(ms); err != nil {
			t.Fatal(err)
		}
		st := newStream(ms, maxSize)
		check("Recv", st.Recv)

		// RecvLent, reading as the pieces arrive: frames are taken whole,
		// handed over or copied, and partly through the buffered reader.
		ms = newMuxStream(sess, 3)
		st = newStream(ms, maxSize)
		delivered := make(chan error, 1)
		go func() { // Owner: the fuzz case; ends after the FIN (or fails the stream).
			err := deliverAll(ms)
			if err != nil {
				ms.fail(err)
			}
			delivered <- err
		}()
		check("RecvLent", st.RecvLent)
		if err := <-delivered; err != nil {
			t.Fatal(err)
		}

		// RecvLent with its read deadline passed, each piece delivered
		// only once a read has timed out on what came before: every piece
		// boundary inside a frame is a timeout mid-frame, which must
		// leave the stream in step.
		ms = newMuxStream(sess, 5)
		st = newStream(ms, maxSize)
		pieces := splitPieces(data, sizes)
		finished := false
		_ = st.SetReadDeadline(time.Now())
		check("RecvLent timing out", func() (*iop.Envelope, error) {
			for {
				env, err := st.RecvLent()
				if finished || !errors.Is(err, os.ErrDeadlineExceeded) {
					return env, err
				}
				if len(pieces) > 0 {
					if err := ms.deliver(pieces[0], 0); err != nil {
						t.Fatalf("deliver: %v", err)
					}
					pieces = pieces[1:]
					continue
				}
				if err := ms.deliver(nil, flagFIN); err != nil {
					t.Fatalf("deliver FIN: %v", err)
				}
				finished = true
				_ = st.SetReadDeadline(time.Time{})
			}
		})
	})
}

// splitPieces cuts b at the sizes given (each size+1 bytes; the rest in
// one piece).
func splitPieces(b, sizes []byte) [][]byte {
	var out [][]byte
	for _, n := range sizes {
		if len(b) == 0 {
			break
		}
		k := min(int(n)+1, len(b))
		out = append(out, b[:k])
		b = b[k:]
	}
	if len(b) > 0 {
		out = append(out, b)
	}
	return out
}

// sameErrKind reports whether two read errors are the same kind: a clean
// end, a truncated frame, an oversized frame, or a payload that does not
// decode.
func sameErrKind(a, b error) bool {
	for _, target := range []error{io.EOF, io.ErrUnexpectedEOF, ErrFrameTooLarge} {
		if errors.Is(a, target) || errors.Is(b, target) {
			return errors.Is(a, target) && errors.Is(b, target)
		}
	}
	return (a == nil) == (b == nil)
}

// benchStream is a stream on a session over a pipe whose far end is
// drained, and a 220-byte body frame to deliver to it; the session closes
// with the benchmark.
func benchStream(b *testing.B) (ms *muxStream, st *Stream, frame []byte) {
	c, s := net.Pipe()
	sess := muxServer(s)
	go func() { _, _ = io.Copy(io.Discard, c) }() // Owner: the benchmark; ends when c is closed at cleanup.
	b.Cleanup(func() { sess.Close(); c.Close() })
	ms = newMuxStream(sess, 1)
	return ms, newStream(ms, 0), bodyFrame(b, 7, bytes.Repeat([]byte("x"), 220))
}

// BenchmarkStreamRecv is the edge's receive of one streamed chunk: a tunnel
// BODY frame of a typical SSE event arrives whole on a stream and is
// read and decoded, by Recv ("recv") or by RecvLent ("lent", how the edge
// reads a tunnel's frames).
func BenchmarkStreamRecv(b *testing.B) {
	for _, name := range []string{"recv", "lent"} {
		b.Run(name, func(b *testing.B) {
			ms, st, frame := benchStream(b)
			recv := st.Recv
			if name == "lent" {
				recv = st.RecvLent
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				if err := ms.deliver(frame, 0); err != nil {
					b.Fatal(err)
				}
				if _, err := recv(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStreamRecvBlocked times a Recv that has to wait for its frame,
// as an edge's does for each streamed chunk: a second goroutine delivers
// each frame once the reader asks for it. With -cpu 1 the reader parks in
// Recv before the deliverer runs. "deadline" waits under a read deadline
// (an exchange's idle timeout), "none" without one.
func BenchmarkStreamRecvBlocked(b *testing.B) {
	for _, name := range []string{"none", "deadline"} {
		b.Run(name, func(b *testing.B) {
			ms, st, frame := benchStream(b)
			if name == "deadline" {
				_ = ms.SetReadDeadline(time.Now().Add(time.Hour))
			}
			ready := make(chan struct{})
			stop := make(chan struct{})
			// Owner: the benchmark; stops when stop is closed.
			go func() {
				for {
					select {
					case <-ready:
					case <-stop:
						return
					}
					if err := ms.deliver(frame, 0); err != nil {
						b.Error(err)
						ms.Reset() // the reader's Recv fails and ends the benchmark
					}
				}
			}()
			b.Cleanup(func() { close(stop) })
			b.ReportAllocs()
			for b.Loop() {
				ready <- struct{}{}
				if _, err := st.Recv(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
