package gateway_test

import (
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/iop-gateway/iop/config"
)

// formatTool is a tool a format request offers.
var formatTool = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "lookup", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{}}}}

// formatFailoverPairs are the failovers the format-beside-tools tests
// run: vLLM and llama-server each before and after OpenAI
// (openai_compat), on a run (tool_mode auto, "") and a tunnel (native).
var formatFailoverPairs = []struct{ first, second, toolMode string }{
	{"vllm", "openai_compat", ""}, {"openai_compat", "vllm", ""},
	{"vllm", "openai_compat", "native"}, {"openai_compat", "vllm", "native"},
	{"llamacpp", "openai_compat", ""}, {"openai_compat", "llamacpp", ""},
	{"llamacpp", "openai_compat", "native"}, {"openai_compat", "llamacpp", "native"},
}

// A format with tools the model may call reaches vLLM and llama-server
// without its response_format, whose constrained decoding would keep the
// model from ever calling a tool with tool_choice auto (vllm-project/vllm
// #39929; llama-server's chat parser builds the whole answer as the
// schema's JSON when a format is given); OpenAI (openai_compat) takes
// both, and gets both, in either order of a failover; with tool_choice
// none vLLM and llama-server get the format. Streamed or not, on a run
// (tool_mode auto) and on a tunnel (native).
func TestMessagesFormatWithToolsByProviderKind(t *testing.T) {
	for _, c := range formatFailoverPairs {
		t.Run(c.first+"_then_"+c.second+"_"+c.toolMode, func(t *testing.T) {
			first, second, e := thinkoffFailover(t, c.first, c.second, func(cfg *config.Edge) {
				for i := range cfg.Nodes[0].Providers {
					cfg.Nodes[0].Providers[i].ToolMode = c.toolMode
				}
			})
			an := anClient(t, e, "")
			p := formatParams("m")
			p.Tools = []anthropic.ToolUnionParam{formatTool}
			none := formatParams("m")
			none.Tools = p.Tools
			none.ToolChoice = anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}}
			for _, stream := range []bool{false, true} {
				sendMessage(t, an, p, stream)
				sendMessage(t, an, none, stream)
			}
			n := 0
			eachFailoverChat(t, 4, first, second, c.first, c.second, func(typ string, chat map[string]json.RawMessage) {
				if chat["tools"] == nil {
					t.Errorf("%s: no tools", typ)
				}
				checkFormat34(t, typ, chat, formatWant)
				n++
			})
			if n != 8 {
				t.Errorf("%d chats checked", n)
			}
		})
	}
}
