package ollama

import (
	"context"
	"testing"
	"time"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// BenchmarkNativeToolsRemembered is the per-request capability check of a
// run offering tools in tool_mode auto once the model's answer is known.
func BenchmarkNativeToolsRemembered(b *testing.B) {
	inst := newInstance(b, &iop.AdapterConfig{BaseUrl: "http://127.0.0.1:1"})
	cfg := inst.cfg.Load()
	inst.tools.put(cfg.toolGen, modelKey("gemma:2b"), false, toolSupportTTL, time.Now())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if inst.nativeTools(ctx, cfg, "gemma:2b") {
			b.Fatal("native")
		}
	}
}

// BenchmarkModelKey is the name folding every remembered check does.
func BenchmarkModelKey(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if modelKey("gemma:2b") != "gemma:2b" {
			b.Fatal("key")
		}
	}
}
