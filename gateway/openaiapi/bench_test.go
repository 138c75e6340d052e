package openaiapi

import (
	"io"
	"strings"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// bigChat is a ~4 MiB chat body, the size class the edge accepts.
func bigChat() []byte {
	msg := `{"role":"user","content":"` + strings.Repeat(`lorem ipsum \"model\" é `, 200) + `"},`
	var b strings.Builder
	b.WriteString(`{"messages":[`)
	for b.Len() < 4<<20 {
		b.WriteString(msg)
	}
	b.WriteString(`{"role":"user","content":"end"}],"model":"qwen-7b","stream":true}`)
	return []byte(b.String())
}

// longChat is a chat body with a 32 KiB prompt of prose: a long system
// prompt or chat history, with the escapes such text carries (paragraph
// breaks every ~400 bytes, a quotation every ~1,000).
func longChat() []byte {
	sentence := `The quick brown fox jumps over the lazy dog, and the gateway relays every token of it. `
	var p strings.Builder
	for i := 0; p.Len() < 32<<10; i++ {
		p.WriteString(sentence)
		if i%5 == 4 {
			p.WriteString(`\n\n`)
		}
		if i%12 == 11 {
			p.WriteString(`He said \"stream it\" and left. `)
		}
	}
	return []byte(`{"model":"qwen-7b","messages":[{"role":"system","content":"You are a helpful assistant."},` +
		`{"role":"user","content":"` + p.String() + `"}],"stream":true,"max_tokens":512}`)
}

// benchEach runs f on body in every iteration, counting body's bytes.
func benchEach(b *testing.B, body []byte, f func([]byte) error) {
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := f(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseChatLong(b *testing.B) { benchEach(b, longChat(), chat) }

func BenchmarkRewriteValidModelLong(b *testing.B) {
	body := longChat()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := RewriteValidModel(body, "Qwen/Qwen2.5-7B-Instruct"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseChat4MiB(b *testing.B) { benchEach(b, bigChat(), chat) }

func BenchmarkRewriteModel4MiB(b *testing.B) {
	body := bigChat()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := RewriteModel(body, "Qwen/Qwen2.5-7B-Instruct"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRewriteModelSmall is the rewrite of a typical request, with the
// body validated again (RewriteModel) and as the edge does it, on the body
// Parse* accepted (RewriteValidModel).
func BenchmarkRewriteModelSmall(b *testing.B) {
	for _, bc := range []struct {
		name    string
		rewrite func([]byte, string) ([]byte, error)
	}{{"validate", RewriteModel}, {"valid", RewriteValidModel}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(smallChat)))
			for b.Loop() {
				if _, err := bc.rewrite(smallChat, "Qwen/Qwen2.5-7B-Instruct"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// smallChat is a typical ~300-byte request: a system and a user message,
// streamed, with one tool.
var smallChat = []byte(`{"model":"qwen-7b","stream":true,"messages":[{"role":"system","content":"You are a helpful assistant."},` +
	`{"role":"user","content":"What is the weather in Paris today?"}],"tools":[{"type":"function","function":{"name":"get_weather",` +
	`"description":"Current weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],` +
	`"temperature":0.7,"max_tokens":256}`)

func BenchmarkParseChatSmall(b *testing.B) { benchEach(b, smallChat, chat) }

// loadChat is the body make bench's load sends (bench/iopbench: chatBody
// with 16 words, not streamed): two messages and two sampling members,
// the request whose validation the edge's CPU per request includes.
var loadChat = []byte(`{"model":"qwen-7b","messages":[{"role":"system","content":"You are a helpful assistant. Answer briefly."},` +
	`{"role":"user","content":"word word word word word word word word word word word word word word word word"}],"max_tokens":64,"temperature":0.7}`)

func BenchmarkParseChatLoad(b *testing.B) { benchEach(b, loadChat, chat) }

// historyChat is a long conversation: 1,000 short turns, the shape where
// the per-message work of validation (not the bytes of a prompt) decides.
func historyChat() []byte {
	var b strings.Builder
	b.WriteString(`{"model":"qwen-7b","stream":true,"messages":[{"role":"system","content":"You are a helpful assistant."}`)
	for i := 0; i < 500; i++ {
		b.WriteString(`,{"role":"user","content":"And what about tomorrow?"},{"role":"assistant","content":"Light rain, 14 degrees."}`)
	}
	b.WriteString(`],"max_tokens":256}`)
	return []byte(b.String())
}

func BenchmarkParseChatHistory(b *testing.B) { benchEach(b, historyChat(), chat) }

// BenchmarkChatStreamDelta renders one streamed text delta (a word, as a
// model streams them) into an SSE chunk and hands it to the writer.
func BenchmarkChatStreamDelta(b *testing.B) {
	benchChatStreamDelta(b, RenderOptions{Model: "qwen-7b", IncludeUsage: true})
}

// benchChatStreamDelta is BenchmarkChatStreamDelta's body for opts.
func benchChatStreamDelta(b *testing.B, opts RenderOptions) {
	w := NewChatStreamWriter(io.Discard, nil, opts)
	benchAdd(b, w, &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: " gateway"})
}

// benchAdd measures w.Add(ev), once added before the timing.
func benchAdd(b *testing.B, w interface{ Add(*iop.RunEvent) error }, ev *iop.RunEvent) {
	if err := w.Add(ev); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Add(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNormalizeChat converts a validated chat body into the run input,
// the run path's second pass over a request: "scan" is NormalizeChat,
// "members" the parsed request's RunInput (what the edge calls: the body
// is not validated again), "encoding-json" the struct decoding they
// replaced (normalize_model_test.go), in the same run.
func BenchmarkNormalizeChat(b *testing.B) {
	for _, body := range []struct {
		name string
		b    []byte
	}{{"small", smallChat}, {"long", longChat()}, {"history", historyChat()}} {
		for _, impl := range []struct {
			name string
			f    func([]byte) error
		}{
			{"scan", func(b []byte) error { _, err := NormalizeChat(b); return err }},
			{"members", func() func([]byte) error {
				req, err := ParseChat(body.b)
				if err != nil {
					b.Fatal(err)
				}
				return func([]byte) error { _, err := req.RunInput(); return err }
			}()},
			{"encoding-json", func(b []byte) error {
				if _, e := modelNormalizeChat(b); e != nil {
					return e
				}
				return nil
			}},
		} {
			b.Run(body.name+"/"+impl.name, func(b *testing.B) {
				b.SetBytes(int64(len(body.b)))
				b.ReportAllocs()
				for b.Loop() {
					if err := impl.f(body.b); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
