package stack

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// The edge logger's gate writes while open and drops once shut, also
// through a logger derived with fields and a sampler (as the Redis
// client's, cluster.UseLogger), so nothing reaches testing.T once the
// test's cleanups ran (testLogger shuts it at cleanup).
func TestLogGate(t *testing.T) {
	obs, seen := observer.New(zap.WarnLevel)
	g := &logGate{}
	log := zap.New(gatedCore{Core: obs, gate: g}).With(zap.String("node_id", "a")).
		WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewSamplerWithOptions(c, 1e9, 1, 0) }))
	log.Warn("while the test runs")
	g.shut()
	log.Warn("after the test ended")
	if n := seen.Len(); n != 1 {
		t.Fatalf("%d entries written, want only the one before the gate shut", n)
	}
}
