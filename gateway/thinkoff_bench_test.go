package gateway

import (
	"bytes"
	"testing"
)

// thinkoffBenchBody is lazyBodyMessages(8, false) with thinking turned off.
func thinkoffBenchBody(b *testing.B) []byte {
	body := lazyBodyMessages(8, false)
	out := bytes.Replace(body, []byte(`"thinking":{"type":"enabled","budget_tokens":31999}`), []byte(`"thinking":{"type":"disabled"}`), 1)
	if bytes.Equal(out, body) {
		b.Fatal("no thinking to turn off")
	}
	return out
}

// BenchmarkMessagesCallRunThinkingOff is BenchmarkMessagesCallRun with
// thinking off: the run input gains reasoning_effort "none" (a provider
// that is not OpenAI-compatible).
func BenchmarkMessagesCallRunThinkingOff(b *testing.B) { benchMessagesRun(b, thinkoffBenchBody(b)) }

// benchMessagesTunnel is a Messages request's cost on the edge up to the
// body a tunnel to a provider of adapter type typ sends.
func benchMessagesTunnel(b *testing.B, body []byte, typ string) {
	benchMessagesCall(b, body, func(k *call) error {
		k.tunnelProvider, k.providerType = true, typ
		_, err := k.tunnelBody()
		return err
	})
}

func BenchmarkMessagesCallTunnel(b *testing.B) {
	benchMessagesTunnel(b, lazyBodyMessages(8, false), "vllm")
}

// BenchmarkMessagesCallTunnelThinkingOff: the tunnel body to vLLM gains
// chat_template_kwargs (a copy of the rendered body).
func BenchmarkMessagesCallTunnelThinkingOff(b *testing.B) {
	benchMessagesTunnel(b, thinkoffBenchBody(b), "vllm")
}
