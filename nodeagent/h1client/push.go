package h1client

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// A streaming body read through WriteTo parks between the upstream's
// writes without a buffer and without the read that finds the socket
// empty (see pusher). What that costs is a bound on one blind spot: a FIN
// that arrives together with the last bytes raises no wake-up of its own
// once those bytes are read (bench/finprobe: 57 of 100 trials), so a
// pusher parked after bytes reads once more when DefaultStreamCheckInterval
// has passed. An upstream that dies mid-answer is therefore noticed at
// once when its FIN comes alone and at most one interval late when it
// does not; a clean end is framed and never waits for it, and a quiet
// stream is checked once after its last bytes, not once per interval.
const DefaultStreamCheckInterval = time.Second

// pushBufSize is the read size of a pushing body: the buffer is taken for
// one wake-up's reads and returned before the pusher parks again. What a
// read brings is handed to the writer whole, and the SSE relay's splitter
// copies it, so a larger read grows every unpaced stream's splitter (16
// KiB: +16 % bytes per stream in stackbench's TunnelStream).
const pushBufSize = 4 << 10

// maxReadsPerWake bounds the reads of one wake-up of a pushing body (256
// KiB at pushBufSize): how much more an upstream that floods the socket
// gets relayed after the request was cancelled or its body closed.
const maxReadsPerWake = 64

// errInterrupted: the request's context ended while the body was pushed
// (WriteTo reports the context's error).
var errInterrupted = errors.New("h1client: connection interrupted")

var pushBufs = sync.Pool{New: func() any { b := make([]byte, pushBufSize); return &b }}

// WriteTo writes the rest of the body to w as it arrives and returns nil
// at its end (io.WriterTo: io.Copy and the node's SSE relay use it). On a
// plain TCP connection the body is read off the socket directly and its
// framing decoded as bytes arrive, so that between two of the upstream's
// writes the reader holds no buffer and, after a read that emptied the
// socket, parks without the further read that Read makes (Go's net.Conn
// reads until EAGAIN before it parks): one system call less per streamed
// event. w's error is returned as is; the connection is then closed.
func (b *body) WriteTo(w io.Writer) (int64, error) {
	if b.err != nil {
		if errors.Is(b.err, io.EOF) {
			return 0, nil
		}
		return 0, b.err
	}
	if b.state.Load() == bodyClosed {
		return 0, ErrBodyClosed
	}
	if !pushSupported || b.pulled || b.kind == 0 || b.c.raw == nil {
		return b.copyTo(w)
	}
	b.pulled = true
	ps := &pusher{b: b, w: w, d: newDecoder(b.kind, b.length, b.t.readBuf)}
	b.pushing.Store(true)
	err := ps.run()
	b.pushing.Store(false)
	if b.state.Load() == bodyClosed {
		// Close came during the push and left the closing to it (see
		// body.Close); what the push then reports follows below.
		b.c.close()
	}
	if err == nil {
		b.c.disarmRead()
		b.err = io.EOF
		b.finish(ps.extra == 0 && ps.d.past() == 0)
		return ps.written, nil
	}
	switch {
	case ps.werr != nil:
		b.err = ErrBodyClosed // the caller gave up on the body
		b.finish(false)
		return ps.written, ps.werr
	case b.state.Load() == bodyClosed:
		b.err = ErrBodyClosed
	case b.ctx.Err() != nil:
		b.err = b.ctx.Err()
	default:
		b.err = fmt.Errorf("h1client: read body: %w", err)
	}
	b.finish(false)
	return ps.written, b.err
}

// copyTo is WriteTo through Read: the body was read from before, or its
// connection gives no access to the socket.
func (b *body) copyTo(w io.Writer) (int64, error) {
	bp := pushBufs.Get().(*[]byte)
	defer pushBufs.Put(bp)
	var written int64
	for {
		n, err := b.Read(*bp)
		if n > 0 {
			m, werr := w.Write((*bp)[:n])
			written += int64(m)
			if werr != nil {
				return written, werr
			}
		}
		if errors.Is(err, io.EOF) {
			return written, nil
		}
		if err != nil {
			return written, err
		}
	}
}

// pusher is one WriteTo in progress: the bytes already buffered with the
// response head go first, then the socket's (readLoop, per platform).
type pusher struct {
	b       *body
	w       io.Writer
	d       *decoder
	written int64
	extra   int   // bytes read past the body's end
	werr    error // w's error
	ended   bool  // the body ended, failed or w failed: nothing more is read
}

func (ps *pusher) run() error {
	if err := ps.drainHead(); err != nil || ps.ended {
		return err
	}
	// The head's buffer is not needed until the connection's next
	// response: a parked stream does not keep it.
	ps.b.c.releaseReader(ps.b.t)
	return ps.readLoop()
}

// drainHead feeds the body bytes that came in with the response head.
// They are copied out first: decode works in place, and the bufio.Reader's
// buffer is not ours to write.
func (ps *pusher) drainHead() error {
	br := ps.b.c.br
	if br.Buffered() == 0 {
		return nil
	}
	bp := pushBufs.Get().(*[]byte)
	defer pushBufs.Put(bp)
	for k := br.Buffered(); k > 0 && !ps.ended; {
		p, _ := br.Peek(min(k, pushBufSize))
		buf := append((*bp)[:0], p...)
		_, _ = br.Discard(len(p))
		k -= len(p)
		if err := ps.feed(buf); err != nil {
			return err
		}
	}
	return nil
}

// feed decodes p (in place) and writes the body bytes it carries. It ends
// the push at the body's end, on a framing error or on w's error.
func (ps *pusher) feed(p []byte) error {
	n, extra, err := ps.d.decode(p)
	if n > 0 {
		m, werr := ps.w.Write(p[:n])
		ps.written += int64(m)
		if werr != nil {
			ps.werr, ps.ended = werr, true
			return werr
		}
	}
	if err != nil {
		ps.ended = true
		return err
	}
	if ps.d.done() {
		ps.extra, ps.ended = extra, true
	}
	return nil
}

// eof is the upstream's close.
func (ps *pusher) eof() error {
	ps.ended = true
	return ps.d.eof()
}
