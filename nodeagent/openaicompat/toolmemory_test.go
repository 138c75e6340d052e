package openaicompat

import (
	"context"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// A remembered refusal of native tools expires (the backend may have been
// restarted with tool parsing on): past it, auto mode tries native again.
func TestNoToolsMemoryExpires(t *testing.T) {
	rec := &recorder{}
	in := newTestInstance(t, TypeVLLM, testConfig(toolFallbackServer(t, rec, vllmToolChoiceError)))
	in.noNativeTools.Store("m", time.Now().Add(-time.Second)) // a refusal whose memory has run out
	if _, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: adapter.OpChat, Input: chatInput("", true)}, &fakeRunSink{}); err != nil {
		t.Fatalf("run: %v", err)
	}
	if rec.count() != 2 || rec.body(0)["tools"] == nil {
		t.Fatalf("%d upstream requests, first with tools %v: want the native attempt made again", rec.count(), rec.body(0)["tools"])
	}
}

// A new base_url forgets what the old backend refused: both the text-tool
// and the max_completion_tokens memories.
func TestReconfigureForgetsRefusals(t *testing.T) {
	in := newTestInstance(t, TypeVLLM, testConfig("http://127.0.0.1:1"))
	in.rememberNoTools("m")
	in.rememberMaxCompletionTokens("m")
	if err := in.Reconfigure(&iop.AdapterConfig{Type: TypeVLLM, BaseUrl: "http://127.0.0.1:2/v1"}); err != nil {
		t.Fatal(err)
	}
	if in.knownNoTools("m") || in.knownMaxCompletionTokens("m") {
		t.Fatalf("after a new base_url: no tools %v, max_completion_tokens %v", in.knownNoTools("m"), in.knownMaxCompletionTokens("m"))
	}
}
