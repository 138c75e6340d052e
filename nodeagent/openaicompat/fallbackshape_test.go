package openaicompat

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The text-tool instruction joins a leading developer message (the newer
// name of system) rather than adding a second system message before it:
// many chat templates take one system message, first.
func TestTextToolInstructionJoinsDeveloperMessage(t *testing.T) {
	out, _ := textBody(t, `{"tools":`+weatherTools+`,"messages":[{"role":"developer","content":"Be terse."},{"role":"user","content":"hi"}]}`)
	msgs := decodeMessages(t, out)
	if len(msgs) != 2 || msgs[0]["role"] != "developer" {
		t.Fatalf("messages %v", msgs)
	}
	if c, _ := msgs[0]["content"].(string); !strings.HasPrefix(c, "Be terse.\n\n# Tools") {
		t.Fatalf("developer content %q", c)
	}
}

// A tool result that names its tool keeps that name in its text form,
// even when its call id points at a call of another name.
func TestTextHistoryKeepsExplicitToolName(t *testing.T) {
	out, _ := textBody(t, `{"tools":`+weatherTools+`,"messages":[
		{"role":"user","content":"hi"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_1","name":"get_forecast","content":"sun"}]}`)
	msgs := decodeMessages(t, out)
	if got := msgs[len(msgs)-1]["content"]; got != `<tool_response>{"name":"get_forecast","content":"sun"}</tool_response>` {
		t.Fatalf("tool response %q", got)
	}
}

// A full KV cache with nothing waiting is a busy engine, not a saturated
// one: "degraded" needs requests waiting too.
func TestVLLMFullCacheWithoutWaitingIsOK(t *testing.T) {
	_, base := newFakeVLLM(t, `vllm:num_requests_running{engine="0"} 8
vllm:num_requests_waiting{engine="0"} 0
vllm:kv_cache_usage_perc{engine="0"} 0.99
`)
	hr, _ := vllmHealth(t, base)
	if h := hr.Health(context.Background()); h.Status != adapter.HealthOK || h.KVCacheUsage != 0.99 {
		t.Fatalf("health %+v, want ok", h)
	}
}

// A probe its caller cancelled is not cached: the next caller probes
// again instead of being told "offline" for up to the cache's TTL.
func TestVLLMCancelledProbeNotCached(t *testing.T) {
	var hits atomic.Int32
	arrived := make(chan struct{}, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
			return
		}
		if hits.Add(1) == 1 {
			arrived <- struct{}{}
			<-r.Context().Done() // hangs until its caller gives up
			return
		}
	})
	hr, _ := vllmHealth(t, srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); hr.Health(ctx) }() // Owner: this test; ends when ctx is cancelled below.
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("the probe never reached the server")
	}
	cancel()
	<-done
	if h := hr.Health(context.Background()); h.Status != adapter.HealthOK {
		t.Fatalf("health after a cancelled probe %+v, want a fresh ok", h)
	}
}

// After a new base_url, a caller that cannot wait for the probe under way
// gets no health (unknown) rather than the old backend's.
func TestVLLMReconfigureDropsLastHealth(t *testing.T) {
	_, oldBase := newFakeVLLM(t, vllmMetricsV1)
	hr, in := vllmHealth(t, oldBase)
	if h := hr.Health(context.Background()); h.Status != adapter.HealthOK {
		t.Fatalf("old health %+v", h)
	}
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	if err := in.Reconfigure(testConfigType(srv.URL, TypeVLLM)); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); hr.Health(context.Background()) }() // Owner: this test; ends when release is closed.
	defer func() { close(release); <-done }()
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("the probe never reached the new server")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if h := hr.Health(ctx); h != (adapter.Health{}) {
		t.Fatalf("health while the new backend's probe is under way %+v, want none", h)
	}
}

// A tool without a name (never from the edge) is left out of the text
// instruction rather than listed as an empty heading.
func TestTextToolInstructionSkipsNamelessTool(t *testing.T) {
	text := toolInstruction(&iop.RunInput{Tools: []*iop.ToolDefinition{{Name: ""}, {Name: "get_weather"}}})
	if strings.Contains(text, "\n## \n") || !strings.Contains(text, "\n## get_weather\n") {
		t.Fatalf("instruction %q", text)
	}
}
