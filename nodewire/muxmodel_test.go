package nodewire

import (
	"bytes"
	"context"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// mStream is the model of one stream: what each end wrote (and so what the
// other end must read, in order) and how far each end has read.
type mStream struct {
	ends    [2]*muxStream // [0] client end, [1] server end
	written [2][]byte     // by end
	read    [2]int        // bytes end i has read of what the other end wrote
	closed  [2]bool       // end i half-closed
	reset   bool
}

type muxModel struct {
	sess    [2]*muxSession // [0] client (node), [1] server (edge)
	streams []*mStream
}

func (m *muxModel) open(rt *rapid.T) {
	side := rapid.IntRange(0, 1).Draw(rt, "opener")
	st, err := m.sess[side].OpenStream()
	if err != nil {
		rt.Fatalf("open: %v", err)
	}
	first := []byte(rapid.StringN(1, 64, -1).Draw(rt, "first"))
	if _, err := st.Write(first); err != nil {
		rt.Fatalf("first write: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	peer, err := m.sess[1-side].AcceptStreamWithContext(ctx)
	if err != nil {
		rt.Fatalf("accept: %v", err)
	}
	ms := &mStream{}
	ms.ends[side], ms.ends[1-side] = st, peer
	ms.written[side] = append([]byte(nil), first...)
	m.streams = append(m.streams, ms)
}

func (m *muxModel) pick(rt *rapid.T, usable func(*mStream) bool) *mStream {
	var ok []*mStream
	for _, s := range m.streams {
		if usable(s) {
			ok = append(ok, s)
		}
	}
	if len(ok) == 0 {
		rt.Skip("no stream in that state")
	}
	return rapid.SampledFrom(ok).Draw(rt, "stream")
}

func (m *muxModel) write(rt *rapid.T) {
	side := rapid.IntRange(0, 1).Draw(rt, "side")
	s := m.pick(rt, func(s *mStream) bool { return !s.reset && !s.closed[side] })
	p := bytes.Repeat([]byte{byte(len(s.written[side]))}, rapid.IntRange(1, 3*muxMaxData).Draw(rt, "size"))
	_ = s.ends[side].SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	n, err := s.ends[side].Write(p)
	_ = s.ends[side].SetWriteDeadline(time.Time{})
	s.written[side] = append(s.written[side], p[:n]...)
	if err != nil && n == len(p) {
		rt.Fatalf("write reported %v after writing everything", err)
	}
}

func (m *muxModel) readSome(rt *rapid.T) {
	side := rapid.IntRange(0, 1).Draw(rt, "side")
	s := m.pick(rt, func(s *mStream) bool { return !s.reset && s.read[side] < len(s.written[1-side]) })
	want := s.written[1-side][s.read[side]:]
	buf := make([]byte, rapid.IntRange(1, len(want)).Draw(rt, "n"))
	_ = s.ends[side].SetReadDeadline(time.Now().Add(waitLong))
	n, err := s.ends[side].Read(buf)
	_ = s.ends[side].SetReadDeadline(time.Time{})
	if err != nil {
		rt.Fatalf("read: %v", err)
	}
	if !bytes.Equal(buf[:n], want[:n]) {
		rt.Fatalf("stream %d: read bytes differ from those written", s.ends[side].StreamID())
	}
	s.read[side] += n
}

func (m *muxModel) closeWrite(rt *rapid.T) {
	side := rapid.IntRange(0, 1).Draw(rt, "side")
	s := m.pick(rt, func(s *mStream) bool { return !s.reset && !s.closed[side] })
	if err := s.ends[side].Close(); err != nil {
		rt.Fatalf("close: %v", err)
	}
	s.closed[side] = true
}

func (m *muxModel) reset(rt *rapid.T) {
	side := rapid.IntRange(0, 1).Draw(rt, "side")
	s := m.pick(rt, func(s *mStream) bool { return !s.reset })
	s.ends[side].Reset()
	s.reset = true
}

// check: windows and buffers never exceed their bounds; the session's
// buffer count never goes negative. (Frames keep arriving while this runs,
// so the count is compared exactly only at the end, in finish.)
func (m *muxModel) check(rt *rapid.T) {
	for i, sess := range m.sess {
		for _, s := range m.streams {
			st := s.ends[i]
			st.mu.Lock()
			if st.sendWin > muxWindow || st.credit > muxWindow {
				rt.Fatalf("stream %d: send window %d, credit %d beyond %d", st.StreamID(), st.sendWin, st.credit, muxWindow)
			}
			if unread := len(st.rbuf) - st.roff; unread > muxWindow {
				rt.Fatalf("stream %d buffers %d bytes, beyond its window", st.StreamID(), unread)
			}
			if cap(st.rbuf) > 2*muxWindow {
				rt.Fatalf("stream %d holds a %d-byte buffer, beyond twice its window", st.StreamID(), cap(st.rbuf))
			}
			st.mu.Unlock()
		}
		if b := sess.buffered.Load(); b < 0 || b > muxMaxBuffered {
			rt.Fatalf("session %d counts %d buffered bytes", i, b)
		}
	}
}

// finish drains every live stream to its end on both sides and requires
// every byte to arrive intact and both stream tables to empty.
func (m *muxModel) finish(rt *rapid.T) {
	for _, s := range m.streams {
		if s.reset {
			continue
		}
		for side := range 2 {
			if !s.closed[side] {
				if err := s.ends[side].Close(); err != nil {
					rt.Fatalf("close: %v", err)
				}
				s.closed[side] = true
			}
		}
	}
	for _, s := range m.streams {
		if s.reset {
			continue
		}
		for side := range 2 {
			want := s.written[1-side][s.read[side]:]
			var got bytes.Buffer
			_ = s.ends[side].SetReadDeadline(time.Now().Add(waitLong))
			if _, err := got.ReadFrom(s.ends[side]); err != nil {
				rt.Fatalf("drain: %v", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				rt.Fatalf("stream %d side %d: %d bytes arrived, %d written after what was read", s.ends[side].StreamID(), side, got.Len(), len(want))
			}
		}
	}
	deadline := time.Now().Add(waitLong)
	for m.sess[0].NumStreams()+m.sess[1].NumStreams() > 0 {
		if time.Now().After(deadline) {
			rt.Fatalf("streams never ended: client %d, server %d", m.sess[0].NumStreams(), m.sess[1].NumStreams())
		}
		time.Sleep(time.Millisecond)
	}
	for i, sess := range m.sess {
		if b := sess.buffered.Load(); b != 0 {
			rt.Fatalf("session %d still counts %d buffered bytes", i, b)
		}
	}
}

// A two-sided model-based test of the multiplexer over a real TCP
// connection: random opens, writes, reads, half-closes and resets on both
// ends; every byte arrives in order, windows and buffer counts stay exact,
// and every stream ends on both sides.
func TestMuxModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c, s := tcpPair(t)
		m := &muxModel{sess: [2]*muxSession{muxClient(c), muxServer(s)}}
		defer m.sess[0].Close()
		defer m.sess[1].Close()
		m.open(rt)
		rt.Repeat(map[string]func(*rapid.T){
			"open":       m.open,
			"write":      m.write,
			"read":       m.readSome,
			"closeWrite": m.closeWrite,
			"reset":      m.reset,
			"":           m.check,
		})
		m.finish(rt)
	})
}
