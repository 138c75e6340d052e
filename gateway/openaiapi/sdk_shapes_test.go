package openaiapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/respjson"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// oaiClient is an openai-go client whose every request is answered with
// body (SSE when it starts with "data:").
func oaiClient(t *testing.T, body []byte) *oai.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if bytes.HasPrefix(body, []byte("data:")) {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	c := oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
	return &c
}

// requireFields fails unless every named field decoded as present and of
// the right type (openai-go marks a missing or mistyped one invalid).
func requireFields(t *testing.T, what string, fields map[string]respjson.Field) {
	t.Helper()
	for name, f := range fields {
		if !f.Valid() {
			t.Errorf("%s: field %s is missing or mistyped (raw %q)", what, name, f.Raw())
		}
	}
}

var chatParams = oai.ChatCompletionNewParams{Model: "m", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}}

// TestOpenAIGoAccumulatesStreamedToolCalls: a streamed text-fallback answer
// with text and two calls, with include_usage, reads through openai-go's
// ChatCompletionAccumulator as the whole answer: the text, both calls by
// index with id, name and arguments, finish_reason tool_calls, and usage
// from the last chunk (empty choices); every chunk has the required fields.
func TestOpenAIGoAccumulatesStreamedToolCalls(t *testing.T) {
	var buf bytes.Buffer
	w := NewChatStreamWriter(&buf, nil, RenderOptions{Model: "m", IncludeUsage: true, ToolNames: []string{"get", "put"}})
	for _, ev := range []*iop.RunEvent{
		evStart(fallbackMeta), evDelta("Let me look. <tool_"), evDelta(`call>{"name":"get","arguments":{"k":1}}</tool_call>`),
		evDelta(`<tool_call>{"name":"put","arguments":"{\"v\":\"é\"}"}</tool_call>`),
		evComplete("stop", &iop.Usage{PromptTokens: 7, CompletionTokens: 5, TotalTokens: 12}, fallbackMeta),
	} {
		if err := w.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	stream := oaiClient(t, buf.Bytes()).Chat.Completions.NewStreaming(context.Background(), chatParams)
	var acc oai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		c := stream.Current()
		chunks++
		requireFields(t, "chunk", map[string]respjson.Field{"id": c.JSON.ID, "object": c.JSON.Object, "created": c.JSON.Created, "model": c.JSON.Model, "choices": c.JSON.Choices})
		for _, ch := range c.Choices {
			requireFields(t, "chunk choice", map[string]respjson.Field{"index": ch.JSON.Index, "delta": ch.JSON.Delta})
		}
		if !acc.AddChunk(c) {
			t.Fatalf("accumulator refused chunk %s", c.RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("%d choices after %d chunks", len(acc.Choices), chunks)
	}
	msg := acc.Choices[0].Message
	if strings.TrimSpace(msg.Content) != "Let me look." || acc.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("content %q finish %q", msg.Content, acc.Choices[0].FinishReason)
	}
	if len(msg.ToolCalls) != 2 {
		t.Fatalf("tool calls %+v", msg.ToolCalls)
	}
	for i, want := range [][2]string{{"get", `{"k":1}`}, {"put", `{"v":"é"}`}} {
		c := msg.ToolCalls[i]
		if !strings.HasPrefix(c.ID, "call_") || c.Type != "function" || c.Function.Name != want[0] || c.Function.Arguments != want[1] {
			t.Fatalf("call %d: %+v, want %v", i, c, want)
		}
	}
	if msg.ToolCalls[0].ID == msg.ToolCalls[1].ID {
		t.Fatal("two calls share an id")
	}
	if acc.Usage.PromptTokens != 7 || acc.Usage.CompletionTokens != 5 || acc.Usage.TotalTokens != 12 {
		t.Fatalf("usage %+v", acc.Usage)
	}
}

// TestOpenAIGoDecodesWholeAnswers: a chat.completion with native tool
// calls, a text_completion and an embeddings list (base64) decode with
// openai-go with every required field present.
func TestOpenAIGoDecodesWholeAnswers(t *testing.T) {
	agg := NewChatAggregator(RenderOptions{Model: "m"})
	native := map[string]string{MetaToolCalls: `[{"id":"call_1","type":"function","function":{"name":"get","arguments":"{}"}}]`}
	agg.Add(evComplete("tool_calls", &iop.Usage{PromptTokens: 3, CompletionTokens: 2}, native))
	body, e := agg.Result()
	if e != nil {
		t.Fatal(e)
	}
	cc, err := oaiClient(t, body).Chat.Completions.New(context.Background(), chatParams)
	if err != nil {
		t.Fatal(err)
	}
	requireFields(t, "chat.completion", map[string]respjson.Field{"id": cc.JSON.ID, "object": cc.JSON.Object, "created": cc.JSON.Created, "model": cc.JSON.Model, "choices": cc.JSON.Choices, "usage": cc.JSON.Usage})
	ch := cc.Choices[0]
	requireFields(t, "choice", map[string]respjson.Field{"index": ch.JSON.Index, "message": ch.JSON.Message, "finish_reason": ch.JSON.FinishReason})
	if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Function.Name != "get" || cc.Usage.TotalTokens != 5 {
		t.Fatalf("decoded %s", cc.RawJSON())
	}

	comp := NewCompletionAggregator(RenderOptions{Model: "m"})
	comp.Add(evDelta("text"))
	comp.Add(evComplete("length", nil, nil))
	if body, e = comp.Result(); e != nil {
		t.Fatal(e)
	}
	c, err := oaiClient(t, body).Completions.New(context.Background(), oai.CompletionNewParams{Model: "m", Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String("p")}})
	if err != nil {
		t.Fatal(err)
	}
	requireFields(t, "text_completion", map[string]respjson.Field{"id": c.JSON.ID, "object": c.JSON.Object, "created": c.JSON.Created, "model": c.JSON.Model, "choices": c.JSON.Choices})
	if c.Choices[0].Text != "text" || c.Choices[0].FinishReason != "length" || !c.Choices[0].JSON.Index.Valid() {
		t.Fatalf("decoded %s", c.RawJSON())
	}

	if body, e = RenderEmbeddings(EmbeddingOptions{Model: "m", EncodingFormat: EncodingBase64, InputCount: 2},
		[]byte(`[[0.5,-1],[2,0.25]]`), &iop.Usage{PromptTokens: 4}); e != nil {
		t.Fatal(e)
	}
	emb, err := oaiClient(t, body).Embeddings.New(context.Background(), oai.EmbeddingNewParams{
		Model: "m", Input: oai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}}, EncodingFormat: oai.EmbeddingNewParamsEncodingFormatBase64,
	})
	if err != nil {
		t.Fatal(err)
	}
	requireFields(t, "embeddings", map[string]respjson.Field{"object": emb.JSON.Object, "data": emb.JSON.Data, "model": emb.JSON.Model, "usage": emb.JSON.Usage})
	if len(emb.Data) != 2 || emb.Data[1].Index != 1 || len(emb.Data[1].Embedding) != 2 || emb.Data[1].Embedding[0] != 2 || emb.Data[0].Embedding[1] != -1 ||
		emb.Usage.TotalTokens != 4 {
		t.Fatalf("decoded %s", emb.RawJSON())
	}
}
