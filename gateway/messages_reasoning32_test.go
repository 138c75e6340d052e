package gateway_test

import (
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// reasoningThinking is the earlier thinking a Messages conversation sends
// back to a tunnel.
const reasoningThinking = "Check the forecast first."

// reasoningMember is the assistant message member each kind of tunnelled
// server reads earlier thinking by ("" for none): vLLM reads reasoning,
// llama.cpp's server reasoning_content; a generic OpenAI-compatible
// server may refuse either.
var reasoningMember = map[string]string{"vllm": "reasoning", "llamacpp": "reasoning_content", "openai_compat": ""}

// A tunnelled Messages conversation keeps its earlier thinking for the
// servers that read it, each under its own member, and sends a generic
// OpenAI-compatible server none, in either order of a failover (the body
// rendered for the first provider is rendered again for the second when it
// reads another member). The middle turn of thinking and empty text goes
// with the thinking, and is left out with it. Streamed or not.
func TestMessagesTunnelReasoningByProviderKind(t *testing.T) {
	for _, c := range []struct{ first, second string }{
		{"vllm", "llamacpp"}, {"llamacpp", "vllm"}, {"vllm", "openai_compat"},
		{"openai_compat", "vllm"}, {"llamacpp", "openai_compat"}, {"openai_compat", "llamacpp"},
	} {
		t.Run(c.first+"_then_"+c.second, func(t *testing.T) {
			first, second, e := thinkoffFailover(t, c.first, c.second)
			an := anClient(t, e, "")
			p := anthropic.MessageNewParams{Model: "m", MaxTokens: 64, Messages: []anthropic.MessageParam{
				userText("Plan my trip."),
				anthropic.NewAssistantMessage(anthropic.NewThinkingBlock("EqQBCkYIBxgC", "Nothing to plan yet."), anthropic.NewTextBlock("")),
				userText("To Paris."),
				anthropic.NewAssistantMessage(anthropic.NewThinkingBlock("EqQBCkYIBxgC", reasoningThinking), anthropic.NewTextBlock("Sunny.")),
				userText("Thanks."),
			}}
			for _, stream := range []bool{false, true} {
				sendMessage(t, an, p, stream)
			}
			eachFailoverChat(t, 2, first, second, c.first, c.second, func(typ string, chat map[string]json.RawMessage) {
				var msgs []map[string]any
				if err := json.Unmarshal(chat["messages"], &msgs); err != nil {
					t.Fatal(err)
				}
				member := reasoningMember[typ]
				want := []map[string]any{{"role": "user", "content": "Plan my trip."}}
				if member != "" {
					want = append(want, map[string]any{"role": "assistant", "content": "", member: "Nothing to plan yet."})
				}
				want = append(want, map[string]any{"role": "user", "content": "To Paris."})
				asst := map[string]any{"role": "assistant", "content": "Sunny."}
				if member != "" {
					asst[member] = reasoningThinking
				}
				want = append(want, asst, map[string]any{"role": "user", "content": "Thanks."})
				got, _ := json.Marshal(msgs)
				wantJSON, _ := json.Marshal(want)
				jsonEqual(t, string(got), string(wantJSON))
			})
		})
	}
}
