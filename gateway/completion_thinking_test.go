package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	openai "github.com/sashabaranov/go-openai"

	"github.com/iop-gateway/iop/gateway/openaiapi"
	"github.com/iop-gateway/iop/nodewire"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

const thinkingCompletion = `{"model":"demo","prompt":"alpha","stream":true}`

func thought(r string) *iop.RunEvent {
	return &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Reasoning: r}
}

// cmplTexts is the text of each text_completion chunk with choices in a
// streamed answer's data events, in order.
func cmplTexts(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	for _, d := range readEvents(t, body) {
		var c struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		if d == "[DONE]" || json.Unmarshal([]byte(d), &c) != nil || len(c.Choices) == 0 {
			continue
		}
		out = append(out, c.Choices[0].Text)
	}
	return out
}

// A legacy completion of a model that thinks before it answers: the
// client has its 200 and a first (empty-text) chunk while the model is
// still thinking, not only when the text begins. Before, nothing at all
// was written until the first text, and a proxy's read timeout cut a
// model that thought for a minute.
func TestCompletionStreamStartsWhileModelThinks(t *testing.T) {
	e := startEdge(t, fakeNodeConfig(t))
	answer := make(chan struct{})
	released := false
	release := func() {
		if !released {
			released = true
			close(answer)
		}
	}
	t.Cleanup(release)
	startFakeNode(t, e, func(n *fakeNode, ctx context.Context, st *nodewire.Stream, first *iop.Envelope) {
		rr := first.GetRunRequest()
		if rr == nil {
			return
		}
		seq := uint64(0)
		send := func(ev *iop.RunEvent) bool {
			seq++
			ev.RunId, ev.Sequence = rr.GetRunId(), seq
			return st.Send(&iop.Envelope{Body: &iop.Envelope_RunEvent{RunEvent: ev}}) == nil
		}
		if !send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_START}) || !send(thought("Let me think about alpha.")) {
			return
		}
		select { // thinking, until the client has its answer's start
		case <-answer:
		case <-ctx.Done():
			return
		}
		if send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: "Hello"}) {
			send(&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, FinishReason: "stop",
				Usage: &iop.Usage{PromptTokens: 1, CompletionTokens: 9}})
		}
		_ = st.CloseWrite()
		<-ctx.Done()
	})

	// The wait bounds a failure only: on success the headers come as soon
	// as the edge has the reasoning.
	ctx, cancel := context.WithTimeout(ctxT(t), waitLong)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/v1/completions", strings.NewReader(thinkingCompletion))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient(t).Do(req)
	if err != nil {
		t.Fatalf("no answer while the model thought: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("first event: %v", err)
	}
	if texts := cmplTexts(t, []byte(line+"\n")); len(texts) != 1 || texts[0] != "" {
		t.Fatalf("first event %q, want a chunk with empty text", line)
	}
	release()
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if texts := cmplTexts(t, rest); strings.Join(texts, "") != "Hello" || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Fatalf("rest of the stream: %s", rest)
	}
	if strings.Contains(string(rest), "alpha") {
		t.Errorf("reasoning reached the client: %s", rest)
	}
	waitReleased(t, e, "mock")
}

// Minutes of thinking keep the stream alive: an empty-text chunk per
// HiddenReasoningKeepAliveBytes of reasoning, all before the text, and
// both OpenAI Go SDKs read the answer through them.
func TestCompletionStreamKeepAliveThroughSDKs(t *testing.T) {
	piece := strings.Repeat("ponder ", 512/7+1)[:512]
	const pieces = 40 // 20 KiB of reasoning
	e, _ := scriptedRunStack(t, func(*iop.RunRequest) []*iop.RunEvent {
		evs := []*iop.RunEvent{{Type: iop.RunEventType_RUN_EVENT_TYPE_START}}
		for range pieces {
			evs = append(evs, thought(piece))
		}
		return append(evs, &iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: "Hello"},
			&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA, Delta: " world"},
			&iop.RunEvent{Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE, FinishReason: "stop",
				Usage: &iop.Usage{PromptTokens: 1, CompletionTokens: 9}})
	})

	r := post(t, e, "/v1/completions", thinkingCompletion)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	texts := cmplTexts(t, r.Body)
	keepAlives := 0
	for _, s := range texts {
		if s != "" {
			break
		}
		keepAlives++
	}
	if want := pieces * 512 / openaiapi.HiddenReasoningKeepAliveBytes; keepAlives < want {
		t.Errorf("%d empty-text chunks before the text for %d bytes of reasoning, want at least %d (%q)", keepAlives, pieces*512, want, texts)
	}
	if strings.Contains(string(r.Body), "ponder") {
		t.Error("reasoning reached the client")
	}

	goc := oaClient(t, e, "k")
	gs, err := goc.CreateCompletionStream(ctxT(t), openai.CompletionRequest{Model: "demo", Prompt: "alpha"})
	if err != nil {
		t.Fatal(err)
	}
	defer gs.Close()
	var text strings.Builder
	finish := ""
	for {
		c, err := gs.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("go-openai: %v", err)
		}
		text.WriteString(c.Choices[0].Text)
		finish = c.Choices[0].FinishReason
	}
	if text.String() != "Hello world" || finish != "stop" {
		t.Errorf("go-openai: text %q, finish %q", text.String(), finish)
	}

	oc := oaGoClient(t, e)
	st := oc.Completions.NewStreaming(ctxT(t), oai.CompletionNewParams{
		Model: "demo", Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String("alpha")}})
	text.Reset()
	for st.Next() {
		if c := st.Current(); len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Text)
			finish = string(c.Choices[0].FinishReason)
		}
	}
	if err := st.Err(); err != nil || text.String() != "Hello world" || finish != "stop" {
		t.Errorf("openai-go: text %q, finish %q, err %v", text.String(), finish, err)
	}
}

// A run that thought and then failed before any text: the stream had
// started, so the failure is its error event (no [DONE]), as on every
// started stream, and go-openai reports it as the API error it is. It
// counts as the 502 it answers.
func TestCompletionStreamThinkingThenError(t *testing.T) {
	e, _ := scriptedRunStack(t, func(*iop.RunRequest) []*iop.RunEvent {
		return []*iop.RunEvent{{Type: iop.RunEventType_RUN_EVENT_TYPE_START}, thought("hmm"),
			{Type: iop.RunEventType_RUN_EVENT_TYPE_ERROR, Error: &iop.RunError{Code: iop.ErrorCode_ERROR_CODE_UPSTREAM, Message: "boom", HttpStatus: 500}}}
	})
	r := post(t, e, "/v1/completions", thinkingCompletion)
	events := readEvents(t, r.Body)
	if r.Status != http.StatusOK || len(events) != 2 || !strings.HasPrefix(events[1], `{"error":`) {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	checkEnvelope(t, []byte(events[1]), "upstream_error")
	waitReleased(t, e, "mock")
	if got := metric(t, e.Registry, "iop_requests_total", map[string]string{"model": "demo", "route": "run", "code": "502"}); got != 1 {
		t.Errorf("iop_requests_total{code=502} = %v, want 1", got)
	}

	gs, err := oaClient(t, e, "k").CreateCompletionStream(ctxT(t), openai.CompletionRequest{Model: "demo", Prompt: "alpha"})
	if err != nil {
		t.Fatal(err)
	}
	defer gs.Close()
	if c, err := gs.Recv(); err != nil || c.Choices[0].Text != "" {
		t.Fatalf("first chunk %+v, %v", c, err)
	}
	_, err = gs.Recv()
	var ae *openai.APIError
	if !errors.As(err, &ae) || ae.Code != "upstream_error" {
		t.Errorf("go-openai after the start: %v, want the upstream_error API error", err)
	}
}
