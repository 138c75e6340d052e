package cluster

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// The Redis client's own messages repeat once per call while Redis does
// not answer ("failed to dial", every renewal retry, take and return):
// the same message is logged once per redisLogEvery, so that an outage is
// not two warnings a second per edge.
func TestRedisClientMessagesDoNotRepeatPerCall(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	UseLogger(zap.New(core))
	t.Cleanup(func() { UseLogger(zap.NewNop()) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there: every dial is refused
	l := Open(Config{Address: addr, TTL: time.Minute, Timeout: time.Second, EdgeID: "a"})
	defer l.Close()
	for range 4 {
		if err := l.Alive(context.Background()); err == nil {
			t.Fatal("Alive answered without a Redis")
		}
	}
	dials := 0
	for _, e := range logs.All() {
		if strings.Contains(e.Message, "failed to dial") {
			dials++
		}
	}
	if dials != 1 {
		t.Fatalf("%d failed-dial messages for 4 calls, want 1", dials)
	}
}
