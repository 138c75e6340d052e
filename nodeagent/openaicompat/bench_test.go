package openaicompat

import "testing"

// chatCompletionBody is a vLLM chat.completion of ~900 bytes, usage near
// its end as vLLM writes it.
var chatCompletionBody = []byte(`{"id":"chatcmpl-8f1c2b7e9d4a4f0c9b6e1a2d3c4b5a69","object":"chat.completion","created":1735689600,` +
	`"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,"message":{"role":"assistant","reasoning_content":null,"content":` +
	`"Sure. Here is a short answer that is about sixty four tokens long, which is typical for a chat reply: the gateway ` +
	`relays the request to the provider, the provider generates the tokens, and the gateway returns them unchanged to the ` +
	`client that asked, with usage accounted on the side. It may quote \"strings\" and mention a usage key in passing.",` +
	`"tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"service_tier":null,"system_fingerprint":null,` +
	`"usage":{"prompt_tokens":48,"total_tokens":112,"completion_tokens":64,"prompt_tokens_details":null},` +
	`"prompt_logprobs":null,"prompt_token_ids":null,"kv_transfer_params":null}`)

func BenchmarkUsageFromBody(b *testing.B) {
	tb := &tailBuffer{limit: maxUsageTail}
	tb.write(chatCompletionBody)
	b.SetBytes(int64(len(chatCompletionBody)))
	for b.Loop() {
		if u := tb.usage(); u == nil || u.GetCompletionTokens() != 64 {
			b.Fatalf("usage %v", u)
		}
	}
}
