package openaiapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func TestCompletionAggregator(t *testing.T) {
	a := NewCompletionAggregator(RenderOptions{Model: "m", ID: "cmpl-1", Created: 5})
	a.Add(evDelta("foo "))
	a.Add(evDelta("bar"))
	a.Add(evComplete("length", &iop.Usage{PromptTokens: 2, CompletionTokens: 2, TotalTokens: 4}, nil))
	body, e := a.Result()
	if e != nil {
		t.Fatal(e)
	}
	want := `{"id":"cmpl-1","object":"text_completion","created":5,"model":"m","choices":[{"text":"foo bar","index":0,"logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4}}`
	if string(body) != want {
		t.Fatalf("got %s", body)
	}
	got, err := sdkClient(t, 200, string(body)).CreateCompletion(context.Background(), openai.CompletionRequest{Model: "m", Prompt: "x"})
	if err != nil || got.Choices[0].Text != "foo bar" || got.Usage.TotalTokens != 4 {
		t.Fatalf("sdk %+v %v", got, err)
	}
	a = NewCompletionAggregator(RenderOptions{Model: "m"})
	a.Add(evError("invalid_request", "bad", 400))
	if _, e := a.Result(); e == nil || e.Status != 400 {
		t.Fatal(e)
	}
}

func TestCompletionStream(t *testing.T) {
	var buf bytes.Buffer
	w := NewCompletionStreamWriter(&buf, nil, RenderOptions{Model: "m", IncludeUsage: true})
	for _, ev := range []*iop.RunEvent{evStart(nil), evDelta("a"), evDelta("b"), evComplete("", nil, nil)} {
		if err := w.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	data := sseData(t, buf.String())
	if len(data) != 5 || data[4] != "[DONE]" || !strings.Contains(data[3], `"choices":[],"usage":{`) || !strings.HasSuffix(data[0], `"usage":null}`) {
		t.Fatalf("%q", data)
	}
	c := sdkClient(t, 200, buf.String())
	st, err := c.CreateCompletionStream(context.Background(), openai.CompletionRequest{Model: "m", Prompt: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var text, finish string
	n := 0
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.Object != "text_completion" {
			t.Fatal(r.Object)
		}
		n++
		for _, ch := range r.Choices {
			text += ch.Text
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if text != "ab" || finish != "stop" || n != 4 {
		t.Fatalf("%q %q %d", text, finish, n)
	}
	if u, reported := w.Usage(); reported || u.CompletionTokens != 1 {
		t.Fatalf("usage %+v", u)
	}

	// Error after first byte.
	buf.Reset()
	w = NewCompletionStreamWriter(&buf, nil, RenderOptions{Model: "m"})
	_ = w.Add(evDelta("a"))
	_ = w.Add(evError("upstream_error", "x", 0))
	if strings.Contains(buf.String(), "[DONE]") || !strings.Contains(buf.String(), `data: {"error":`) || w.Failure() == nil {
		t.Fatal(buf.String())
	}
	// Error before first byte.
	buf.Reset()
	w = NewCompletionStreamWriter(&buf, nil, RenderOptions{Model: "m"})
	var e *Error
	if err := w.Add(evError("upstream_error", "x", 0)); !errors.As(err, &e) || buf.Len() != 0 {
		t.Fatal(err)
	}
	if w.Abort(UpstreamError("")) != nil {
		t.Fatal("abort after end must be a no-op")
	}
}

func TestEmbeddings(t *testing.T) {
	output := []byte(`[[0.1, -2.5e-3, 1], [3.25, 0, -1]]`)
	a := NewEmbeddingAggregator(EmbeddingOptions{Model: "emb", InputCount: 2})
	a.Add(evStart(nil))
	a.Add(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, Output: output, Usage: &iop.Usage{PromptTokens: 9}})
	body, e := a.Result()
	if e != nil {
		t.Fatal(e)
	}
	want := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,-2.5e-3,1]},{"object":"embedding","index":1,"embedding":[3.25,0,-1]}],"model":"emb","usage":{"prompt_tokens":9,"total_tokens":9}}`
	if string(body) != want {
		t.Fatalf("got %s", body)
	}
	var resp openai.EmbeddingResponse
	if err := json.Unmarshal(body, &resp); err != nil || resp.Data[1].Embedding[0] != 3.25 || resp.Usage.PromptTokens != 9 {
		t.Fatalf("%+v %v", resp, err)
	}

	// base64: little-endian float32, decoded by the SDK's own code.
	b64, e := RenderEmbeddings(EmbeddingOptions{Model: "emb", EncodingFormat: EncodingBase64, PromptTokens: 3}, output, nil)
	if e != nil {
		t.Fatal(e)
	}
	var r64 openai.EmbeddingResponseBase64
	if err := json.Unmarshal(b64, &r64); err != nil {
		t.Fatal(err)
	}
	dec, err := r64.ToEmbeddingResponse()
	if err != nil {
		t.Fatal(err)
	}
	if dec.Data[0].Embedding[1] != float32(-2.5e-3) || dec.Data[1].Embedding[0] != 3.25 || dec.Usage.PromptTokens != 3 || dec.Usage.TotalTokens != 3 {
		t.Fatalf("%+v", dec)
	}
	raw, _ := base64.StdEncoding.DecodeString(string(r64.Data[0].Embedding))
	if len(raw) != 12 || math.Float32frombits(binary.LittleEndian.Uint32(raw[8:])) != 1 {
		t.Fatalf("layout %x", raw)
	}

	for _, bad := range []string{``, `[]`, `{}`, `[[1],"x"]`, `[null]`, `[[1,"a"]]`} {
		if _, e := RenderEmbeddings(EmbeddingOptions{Model: "e"}, []byte(bad), nil); e == nil || e.Status != 502 {
			t.Errorf("%q: %v", bad, e)
		}
	}
	if _, e := RenderEmbeddings(EmbeddingOptions{Model: "e", InputCount: 3}, output, nil); e == nil || !strings.Contains(e.Message, "2 embeddings for 3 inputs") {
		t.Fatal(e)
	}
	a = NewEmbeddingAggregator(EmbeddingOptions{Model: "e"})
	a.Add(evError("unsupported", "no embeddings here", 0))
	if _, e := a.Result(); e == nil || e.Status != 400 {
		t.Fatal(e)
	}
}

func TestModels(t *testing.T) {
	got := string(ModelsList([]string{"qwen-7b", "demo"}, 1700000000))
	want := `{"object":"list","data":[{"id":"qwen-7b","object":"model","created":1700000000,"owned_by":"iop"},{"id":"demo","object":"model","created":1700000000,"owned_by":"iop"}]}`
	if got != want {
		t.Fatalf("got %s", got)
	}
	if got := string(ModelsList(nil, 1)); got != `{"object":"list","data":[]}` {
		t.Fatal(got)
	}
	list, err := sdkClient(t, 200, want).ListModels(context.Background())
	if err != nil || len(list.Models) != 2 || list.Models[1].ID != "demo" || list.Models[0].OwnedBy != "iop" {
		t.Fatalf("%+v %v", list, err)
	}
	if got := string(ModelObject("demo", 2)); got != `{"id":"demo","object":"model","created":2,"owned_by":"iop"}` {
		t.Fatal(got)
	}
}
