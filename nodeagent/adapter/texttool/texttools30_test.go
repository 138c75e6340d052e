package texttool

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/iop-gateway/iop/internal/testinput"
	"github.com/iop-gateway/iop/nodeagent/adapter"
)

// Input leaves the caller's input as it was: an adapter that falls back
// after a refusal still holds the native form it sent first.
func TestInputLeavesTheInputAlone(t *testing.T) {
	in := testinput.Chat(`{"messages":[{"role":"system","content":"Be terse."},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}],"tools":[{"type":"function","function":{"name":"f"}}]}`)
	before := proto.Clone(in)
	out, marked := Input(in)
	if !marked || len(out.GetTools()) != 0 || len(out.GetMessages()) != 3 {
		t.Fatalf("marked %v, out %v", marked, out)
	}
	if !proto.Equal(in, before) {
		t.Fatalf("input changed:\n%v\nwas\n%v", in, before)
	}
}

func TestMark(t *testing.T) {
	res := &adapter.Result{}
	Mark(res)
	if res.Metadata[adapter.MetaTextToolFallback] != "true" {
		t.Fatalf("metadata %v", res.Metadata)
	}
	res = &adapter.Result{Metadata: map[string]string{"k": "v"}}
	Mark(res)
	if len(res.Metadata) != 2 {
		t.Fatalf("metadata %v", res.Metadata)
	}
}
