package gateway_test

import (
	"net"
	"time"
)

// stallLimit bounds how long a long exchange (megabytes read at a pace,
// or relayed through the wire and the edge's hold) may stand still
// before the test gives up on it: a bound on a hang, never on the
// exchange's whole length, which under -race on a loaded 2-core box ran
// to 44 s for readPaced's nominal 11.5 s and 84 s for the held-answer
// bound's 33 MiB.
const stallLimit = 30 * time.Second

// stallingConn arms a fresh read deadline of stallLimit before each Read:
// a peer that stops sending fails the read, one that keeps sending at any
// pace does not.
type stallingConn struct{ net.Conn }

func (c stallingConn) Read(b []byte) (int, error) {
	_ = c.SetReadDeadline(time.Now().Add(stallLimit))
	return c.Conn.Read(b)
}
