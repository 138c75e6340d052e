package gateway_test

import (
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// sdkCall is one tool call a chat stream's deltas built.
type sdkCall struct{ id, typ, name, args string }

// sdkStreamed is what a chat stream read through go-openai carried: its
// text, last finish reason, usage (nil without a usage chunk) and tool
// calls by index.
type sdkStreamed struct {
	content string
	finish  openai.FinishReason
	usage   *openai.Usage
	calls   map[int]*sdkCall
}

// readSDKStream reads st to its end and closes it; an error other than
// the stream's end, or a tool call delta without its index (the SDK
// cannot assemble it), fails t.
func readSDKStream(t *testing.T, st *openai.ChatCompletionStream) sdkStreamed {
	t.Helper()
	defer st.Close()
	got := sdkStreamed{calls: map[int]*sdkCall{}}
	var content strings.Builder
	for {
		resp, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if resp.Usage != nil {
			got.usage = resp.Usage
		}
		for _, ch := range resp.Choices {
			content.WriteString(ch.Delta.Content)
			if ch.FinishReason != "" {
				got.finish = ch.FinishReason
			}
			for _, d := range ch.Delta.ToolCalls {
				if d.Index == nil {
					t.Fatalf("tool call delta without index: %+v", d)
				}
				c := got.calls[*d.Index]
				if c == nil {
					c = &sdkCall{}
					got.calls[*d.Index] = c
				}
				c.id += d.ID
				c.typ += string(d.Type)
				c.name += d.Function.Name
				c.args += d.Function.Arguments
			}
		}
	}
	got.content = content.String()
	return got
}

// joinedCalls is the names and the arguments of the calls, each joined
// in index order.
func (s sdkStreamed) joinedCalls() (names, args string) {
	var n, a strings.Builder
	for _, i := range slices.Sorted(maps.Keys(s.calls)) {
		n.WriteString(s.calls[i].name)
		a.WriteString(s.calls[i].args)
	}
	return n.String(), a.String()
}
