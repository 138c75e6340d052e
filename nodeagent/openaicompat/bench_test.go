package openaicompat

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

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

// eventReader yields one SSE stream the way a paced upstream delivers it:
// every Read returns one whole event (or less, if p is smaller).
type eventReader struct {
	events [][]byte
	i, off int
}

func (r *eventReader) Read(p []byte) (int, error) {
	if r.i == len(r.events) {
		return 0, io.EOF
	}
	n := copy(p, r.events[r.i][r.off:])
	if r.off += n; r.off == len(r.events[r.i]) {
		r.i, r.off = r.i+1, 0
	}
	return n, nil
}

// Close lets the relay arm its close of a body left open after "[DONE]",
// as it does for a real response body.
func (r *eventReader) Close() error { return nil }

// countSink counts body bytes; it keeps nothing.
type countSink struct{ n int }

func (s *countSink) Status(int, http.Header) error    { return nil }
func (s *countSink) Body(p []byte) error              { s.n += len(p); return nil }
func (s *countSink) Usage(*iop.Usage) error           { return nil }
func (s *countSink) Metadata(map[string]string) error { return nil }

// BenchmarkRelaySSE relays a 64-chunk chat stream with its usage chunk, one
// event per upstream read (a paced stream): the node's per-chunk work
// outside the wire.
func BenchmarkRelaySSE(b *testing.B) {
	var events [][]byte
	for i := range 64 {
		events = append(events, fmt.Appendf(nil, "data: {\"id\":\"chatcmpl-5a1f3b2c9e8d4f7a\",\"object\":\"chat.completion.chunk\",\"created\":1727000000,\"model\":\"Qwen/Qwen2.5-7B-Instruct\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok%d\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n", i))
	}
	events = append(events, []byte("data: {\"id\":\"chatcmpl-5a1f3b2c9e8d4f7a\",\"object\":\"chat.completion.chunk\",\"created\":1727000000,\"model\":\"Qwen/Qwen2.5-7B-Instruct\",\"choices\":[],\"usage\":{\"prompt_tokens\":48,\"total_tokens\":112,\"completion_tokens\":64}}\n\n"), []byte("data: [DONE]\n\n"))
	total := 0
	for _, e := range events {
		total += len(e)
	}
	b.SetBytes(int64(total))
	for b.Loop() {
		sink := &countSink{}
		if err := relaySSE(&eventReader{events: events}, sink); err != nil || sink.n != total {
			b.Fatalf("relayed %d of %d bytes: %v", sink.n, total, err)
		}
	}
}

// nopRunSink takes deltas and reasoning and keeps nothing.
type nopRunSink struct{}

func (nopRunSink) Delta(string) error     { return nil }
func (nopRunSink) Reasoning(string) error { return nil }

// BenchmarkStreamEvents decodes a 64-chunk vLLM chat stream on the run
// path: the node's per-chunk work for a normalized run outside the wire,
// for an answer without reasoning and for one whose chunks all carry
// reasoning (decoded as chunkOf[reasoningAnswer]).
func BenchmarkStreamEvents(b *testing.B) {
	for _, c := range []struct{ name, delta string }{
		{"content", `{"content":"tok%d"}`},
		{"reasoning", `{"reasoning_content":"tok%d"}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			var events [][]byte
			for i := range 64 {
				events = append(events, fmt.Appendf(nil, "{\"id\":\"chatcmpl-5a1f3b2c9e8d4f7a\",\"object\":\"chat.completion.chunk\",\"created\":1727000000,\"model\":\"Qwen/Qwen2.5-7B-Instruct\",\"choices\":[{\"index\":0,\"delta\":"+c.delta+",\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}", i))
			}
			events = append(events, []byte("{\"id\":\"chatcmpl-5a1f3b2c9e8d4f7a\",\"object\":\"chat.completion.chunk\",\"created\":1727000000,\"model\":\"Qwen/Qwen2.5-7B-Instruct\",\"choices\":[],\"usage\":{\"prompt_tokens\":48,\"total_tokens\":112,\"completion_tokens\":64}}"))
			total := 0
			for _, e := range events {
				total += len(e)
			}
			b.SetBytes(int64(total))
			b.ReportAllocs()
			for b.Loop() {
				st := &streamState{sink: nopRunSink{}}
				for _, e := range events {
					if err := st.event(e); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
