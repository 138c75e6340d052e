package stack

import (
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
)

// testLogger is a zaptest logger at warn level whose entries are dropped
// once tb's cleanups have run. The Redis client's logger is process-wide
// (cluster.UseLogger), and its connection pool dials on goroutines its
// Close does not wait for: one that gives up after the test ended would
// log through testing.T, which panics ("Log in goroutine after … has
// completed").
func testLogger(tb testing.TB) *zap.Logger {
	g := &logGate{}
	// Registered before the edge's Close: cleanups run last-in first-out,
	// so the gate shuts after the edge has closed.
	tb.Cleanup(g.shut)
	return zaptest.NewLogger(tb, zaptest.Level(zap.WarnLevel), zaptest.WrapOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return gatedCore{Core: c, gate: g}
	})))
}

// logGate is shut once the test's cleanups ran; writes hold it shared, so
// none is in progress once shut returns.
type logGate struct {
	mu     sync.RWMutex
	closed bool // guarded by mu
}

func (g *logGate) shut() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// gatedCore writes through its Core while its gate is open.
type gatedCore struct {
	zapcore.Core
	gate *logGate
}

func (c gatedCore) With(fields []zapcore.Field) zapcore.Core {
	return gatedCore{Core: c.Core.With(fields), gate: c.gate}
}

func (c gatedCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c gatedCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	c.gate.mu.RLock()
	defer c.gate.mu.RUnlock()
	if c.gate.closed {
		return nil
	}
	return c.Core.Write(e, fields)
}
