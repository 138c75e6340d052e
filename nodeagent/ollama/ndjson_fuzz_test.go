package ollama

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/iop-gateway/iop/nodeagent/adapter"
)

// The seed corpora live in testdata/fuzz/<FuzzName>/ (real Ollama lines,
// error lines and broken variants); `go test` replays them every run.

func FuzzDecodeChunk(f *testing.F) {
	f.Fuzz(func(t *testing.T, line []byte) {
		c, err := decodeChunk(line)
		if err != nil {
			if c != nil || !errors.Is(err, ErrMalformedLine) {
				t.Fatalf("decodeChunk error contract broken: %v, %v", c, err)
			}
			return
		}
		msg := c.errorText()
		if len(msg) > maxMessageLen+len("…") {
			t.Fatalf("error text not bounded: %d bytes", len(msg))
		}
		if msg != "" && !utf8.ValidString(msg) && c.Error != nil && utf8.Valid(*c.Error) {
			t.Fatalf("bounded error text broke UTF-8: %q", msg)
		}
		if u := usageOf(c); u != nil && (u.PromptTokens < 0 || u.CompletionTokens < 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens) {
			t.Fatalf("usage = %v", u)
		}
		if c.Message != nil && len(c.Message.ToolCalls) > 0 {
			out, err := openAIToolCalls(c.Message.ToolCalls)
			if err != nil {
				t.Fatalf("tool calls from a decoded line failed: %v", err)
			}
			var calls []openAIToolCallOut
			if err := json.Unmarshal([]byte(out), &calls); err != nil || len(calls) != len(c.Message.ToolCalls) {
				t.Fatalf("tool calls %q: %v", out, err)
			}
		}
	})
}

// discardSink counts deltas and reasoning pieces; it keeps nothing.
type discardSink struct{ n, r int }

func (d *discardSink) Delta(string) error     { d.n++; return nil }
func (d *discardSink) Reasoning(string) error { d.r++; return nil }

func FuzzReadStream(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		// Both endpoints' shapes, from one corpus: chat reads message,
		// generate response (each with its thinking).
		for _, text := range []textOf{chatText, generateText} {
			out, err := readStream(bytes.NewReader(body), text, &discardSink{})
			if err != nil {
				var ae *adapter.Error
				if out != nil || !errors.As(err, &ae) || ae.Code != adapter.CodeUpstream {
					t.Fatalf("readStream error contract broken: %v, %v", out, err)
				}
				continue
			}
			if _, err := out.result(); err != nil {
				t.Fatalf("result of a finished stream: %v", err)
			}
		}
	})
}
