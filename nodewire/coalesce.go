package nodewire

import (
	"encoding/binary"
	"net"
)

// yamux frame header layout (github.com/hashicorp/yamux const.go): version,
// type, flags (2), stream id (4), length (4). Type 0 is a data frame whose
// body of `length` bytes follows.
const (
	muxHeaderLen = 12
	muxTypeData  = 0
)

// coalescingConn merges each yamux data-frame header with the body that
// follows it into one write. yamux's send loop writes the 12-byte header and
// the body with two Write calls; on a TCP_NODELAY socket that is two packets
// and two wake-ups of the peer per frame. Only the multiplexer's single
// send goroutine writes, so no lock is needed.
type coalescingConn struct {
	net.Conn
	hdr     [muxHeaderLen]byte
	pending bool
	scratch []byte
}

func (c *coalescingConn) Write(p []byte) (int, error) {
	if c.pending {
		c.pending = false
		c.scratch = append(append(c.scratch[:0], c.hdr[:]...), p...)
		n, err := c.Conn.Write(c.scratch)
		if cap(c.scratch) > 256<<10 {
			c.scratch = nil // keep no huge buffer around after a large frame
		}
		n -= muxHeaderLen
		if n < 0 {
			n = 0
		}
		return n, err
	}
	if len(p) == muxHeaderLen && p[1] == muxTypeData && binary.BigEndian.Uint32(p[8:12]) > 0 {
		copy(c.hdr[:], p)
		c.pending = true
		return len(p), nil
	}
	return c.Conn.Write(p)
}
