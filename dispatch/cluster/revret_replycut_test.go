package cluster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iop-gateway/iop/internal/testredis"
)

// cutMarker begins the reply after which cutAfterReply cuts the
// connection.
var cutMarker = []byte("-WRONGTYPE")

// cutAfterReply is a loopback proxy in front of a redis-server that
// passes everything until Redis sends a WRONGTYPE error reply: it passes
// that reply whole, then closes both sides, so the replies of the
// pipeline's later commands never arrive (a connection cut mid-pipeline).
func cutAfterReply(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	// Owner: the test (cleanup closes the listener). Stops when Accept
	// fails.
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			// Owner: the proxy. Stops when either side closes.
			go func() {
				_, _ = io.Copy(s, c)
				_ = s.Close()
			}()
			// Owner: the proxy. Stops when Redis's side closes or the
			// marked reply has passed.
			go func() {
				defer c.Close()
				defer s.Close()
				buf := make([]byte, 32<<10)
				var pending []byte
				for {
					n, err := s.Read(buf)
					pending = append(pending, buf[:n]...)
					if i := bytes.Index(pending, cutMarker); i >= 0 {
						if j := bytes.Index(pending[i:], []byte("\r\n")); j >= 0 {
							_, _ = c.Write(pending[:i+j+2])
							return
						}
					} else {
						// Held back only while it may be the marker's start
						// (a reply ends in "\r\n", which no marker holds).
						keep := 0
						for k := min(len(cutMarker)-1, len(pending)); k > 0; k-- {
							if bytes.HasSuffix(pending, cutMarker[:k]) {
								keep = k
								break
							}
						}
						if _, werr := c.Write(pending[:len(pending)-keep]); werr != nil {
							return
						}
						pending = append(pending[:0], pending[len(pending)-keep:]...)
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// A connection cut after Redis refused the first command of a batch but
// before the others were answered is ErrUnavailable, not ErrRefused: the
// unanswered commands may have run, or run still, so the caller must
// treat the batch's re-adds as unsure. Only a batch whose every command
// Redis answered is a refusal.
func TestApplyCutAfterAnErrorReplyIsUnavailable(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	broken := Key("n", "broken")
	if err := rdb.Set(ctx, broken, "someone else's", 0).Err(); err != nil {
		t.Fatal(err)
	}
	l := ledger(t, cutAfterReply(t, rs.Addr), "e", time.Minute)
	// The return's script (refused), then a waiter's removal: the cut
	// comes after the first reply.
	err := l.Apply(ctx, []Update{{Kind: OpReturn, Key: broken, ID: "e/0"}, {Kind: OpUnwait, Key: WaitKey("m", 0), ID: "e/w1:0"}})
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRefused) {
		t.Fatalf("apply cut after an error reply: %v; want %v, not %v", err, ErrUnavailable, ErrRefused)
	}
}
