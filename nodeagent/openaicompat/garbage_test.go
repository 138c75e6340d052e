package openaicompat

import (
	"bufio"
	"context"
	"errors"
	"github.com/iop-gateway/iop/internal/testinput"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// vllmWholeChat is vLLM's non-streamed chat.completion, byte for byte
// (what a server that ignores "stream": true sends).
const vllmWholeChat = `{"id":"chatcmpl-b1d2c3","object":"chat.completion","created":1727000000,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there.","tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":9,"total_tokens":12,"completion_tokens":3,"prompt_tokens_details":null},"prompt_logprobs":null}`

const htmlPage = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n"

func runOnce(t *testing.T, op iop.RunOperation, h http.HandlerFunc) (*adapter.Result, *fakeRunSink, error) {
	t.Helper()
	srv := newServer(t, h)
	in := newTestInstance(t, TypeVLLM, testConfig(srv.URL))
	sink := &fakeRunSink{}
	input := chatInput("", false)
	if op == adapter.OpEmbedding {
		input = testinput.For(op, `{"input":["a"]}`)
	}
	res, err := in.Run(context.Background(), &iop.RunRequest{Target: "m", Operation: op, Input: input}, sink)
	return res, sink, err
}

func TestRunWholeJSONAnswer(t *testing.T) {
	res, sink, err := runOnce(t, adapter.OpChat, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, vllmWholeChat)
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if sink.text() != "Hello there." || res.FinishReason != "stop" || res.Usage.GetTotalTokens() != 12 {
		t.Fatalf("text %q result %+v", sink.text(), res)
	}
}

// TestRunGarbageIsUpstreamError: a 2xx answer that is not a complete,
// readable answer is an upstream error, never an empty success.
func TestRunGarbageIsUpstreamError(t *testing.T) {
	cases := []struct {
		name     string
		op       iop.RunOperation
		h        http.HandlerFunc
		sentinel error
		msg      string
	}{
		{"html as json", adapter.OpChat, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, htmlPage)
		}, errUnreadableBody, msgUnreadableBody},
		{"json of the wrong shape", adapter.OpChat, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"choices":"none"}`)
		}, errUnreadableBody, msgUnreadableBody},
		{"html page", adapter.OpChat, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, htmlPage)
		}, errStreamIncomplete, msgStreamIncomplete},
		{"empty sse", adapter.OpChat, func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
		}, errStreamIncomplete, msgStreamIncomplete},
		{"sse without terminal event", adapter.OpChat, func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			sseWrite(t, w, vllmChunk(`{"role":"assistant","content":""}`, ""))
			sseWrite(t, w, vllmChunk(`{"content":"Hel"}`, ""))
		}, errStreamIncomplete, msgStreamIncomplete},
		{"sse with a broken chunk", adapter.OpChat, func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			sseWrite(t, w, vllmChunk(`{"content":"Hel"}`, ""))
			sseWrite(t, w, `data: {"id":"chatcmpl-5a1f3b2c9e8d4f7a","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"lo`+"\n\n")
			sseWrite(t, w, vllmChunk(`{"content":""}`, "stop"))
			sseWrite(t, w, vllmDone)
		}, errUnreadableChunk, msgUnreadableChunk},
		{"sse with usage only", adapter.OpChat, func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			sseWrite(t, w, vllmUsageChunk(9, 0))
			sseWrite(t, w, vllmDone)
		}, errNoChoices, msgNoChoices},
		{"done only", adapter.OpCompletion, func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			sseWrite(t, w, vllmDone)
		}, errNoChoices, msgNoChoices},
		{"whole answer without choices", adapter.OpChat, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"chatcmpl-b1d2c3","object":"chat.completion","created":1727000000,"model":"m","choices":[],"usage":{"prompt_tokens":9,"total_tokens":9,"completion_tokens":0}}`)
		}, errNoChoices, msgNoChoices},
		{"embeddings html", adapter.OpEmbedding, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, htmlPage)
		}, errUnreadableBody, msgUnreadableBody},
		{"embeddings without data", adapter.OpEmbedding, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"embd-4f2a","object":"list","created":1727000000,"model":"m","data":[],"usage":{"prompt_tokens":1,"total_tokens":1,"completion_tokens":0}}`)
		}, errNoChoices, msgNoChoices},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, _, err := runOnce(t, tc.op, tc.h)
			if res != nil {
				t.Fatalf("result %+v for garbage", res)
			}
			ae := asAdapterError(t, err)
			if ae.Code != adapter.CodeUpstream || ae.Message != tc.msg || !errors.Is(err, tc.sentinel) {
				t.Fatalf("error %+v (%v)", ae, err)
			}
		})
	}
}

// TestRunStreamCutMidChunk: the connection dies inside a chunked SSE body.
func TestRunStreamCutMidChunk(t *testing.T) {
	res, _, err := runOnce(t, adapter.OpChat, func(w http.ResponseWriter, r *http.Request) {
		conn, buf, herr := w.(http.Hijacker).Hijack()
		if herr != nil {
			t.Error(herr)
			return
		}
		defer conn.Close()
		chunk := vllmChunk(`{"content":"Hel"}`, "")
		writeRaw(buf, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n")
		writeRaw(buf, formatChunk(chunk))
		writeRaw(buf, "400\r\ndata: {\"id\":") // a chunk announced, never finished
		_ = buf.Flush()
	})
	if res != nil {
		t.Fatalf("result %+v", res)
	}
	if ae := asAdapterError(t, err); ae.Code != adapter.CodeUpstream {
		t.Fatalf("error %+v", ae)
	}
}

func writeRaw(w *bufio.ReadWriter, s string) { _, _ = w.WriteString(s) }

func formatChunk(s string) string {
	return strconv.FormatInt(int64(len(s)), 16) + "\r\n" + s + "\r\n"
}
