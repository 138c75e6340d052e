package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/iop-gateway/iop/gateway/anthropicapi"
)

// convertSSE runs an OpenAI chat stream (the bytes a tunnelled upstream
// sends, or the run renderer writes) through the Messages surface's
// converting writer, written in pieces cut at cuts, and returns what the
// client receives.
func convertSSE(t *testing.T, stream []byte, cuts []int) []byte {
	t.Helper()
	req, aerr := anthropicapi.ParseRequest([]byte(`{"model":"m","max_tokens":8,"stream":true,"stop_sequences":["S"],"messages":[{"role":"user","content":"hi"}]}`))
	if aerr != nil {
		t.Fatal(aerr)
	}
	rec := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(rec)
	mw := &messagesWriter{ResponseWriter: c.Writer, header: http.Header{}, requestID: "req_1", writeTimeout: time.Second}
	mw.start(req, 3)
	mw.Header().Set("Content-Type", "text/event-stream")
	mw.WriteHeader(http.StatusOK)
	prev := 0
	for _, cut := range append(cuts, len(stream)) {
		cut = min(max(cut, prev), len(stream))
		if _, err := mw.Write(stream[prev:cut]); err != nil {
			break // the converted stream failed (and said so in an error event)
		}
		prev = cut
	}
	mw.finish()
	return rec.Body.Bytes()
}

var generatedID = regexp.MustCompile(`"(msg|toolu)_[A-Z2-7]{26}"`)

// FuzzMessagesWriterSSE: the converting writer reads upstream bytes, so
// whatever they are and however the network cuts them, the client gets a
// well-formed Messages event stream (each event one `event:` line and one
// `data:` line of JSON, ending with message_stop or error, nothing after),
// and the same one for every cut.
func FuzzMessagesWriterSSE(f *testing.F) {
	chunk := func(delta, finish string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	f.Add([]byte(chunk(`{"role":"assistant","content":""}`, "null")+chunk(`{"content":"Hel"}`, "null")+chunk(`{"content":"lo"}`, `"stop"`)+
		`data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}`+"\n\n"+"data: [DONE]\n\n"), uint16(5), uint16(77))
	f.Add([]byte(chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]}`, "null")+
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}`, "null")+
		chunk(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"g","arguments":"{}"}}]}`, `"tool_calls"`)+"data: [DONE]\n\n"), uint16(1), uint16(200))
	f.Add([]byte(strings.ReplaceAll(chunk(`{"content":"a"}`, "null")+": keep-alive\n\n"+chunk(`{"content":"b"}`, `"stop"`)+"data:[DONE]\n\n", "\n", "\r\n")), uint16(2), uint16(3))
	f.Add([]byte(chunk(`{"content":"a"}`, "null")+`data: {"error":{"message":"boom","type":"server_error","param":null,"code":"upstream_error"}}`+"\n\n"), uint16(0), uint16(9))
	f.Add([]byte(chunk(`{"content":"a"}`, "null")+"data: {\"choices\":[{\"index\":0,\"delta\":\r{\"content\":\"b\"}}]}\r\r"+"data: not json\n\n"), uint16(4), uint16(4))
	f.Add([]byte(chunk(`{"content":"cut short"}`, "null")), uint16(10), uint16(11))
	f.Fuzz(func(t *testing.T, stream []byte, a, b uint16) {
		if len(stream) > 1<<16 {
			return
		}
		whole := convertSSE(t, stream, nil)
		checkMessagesEvents(t, whole)
		cuts := []int{int(a) % (len(stream) + 1), int(b) % (len(stream) + 1)}
		if cuts[0] > cuts[1] {
			cuts[0], cuts[1] = cuts[1], cuts[0]
		}
		split := convertSSE(t, stream, cuts)
		norm := func(b []byte) []byte { return generatedID.ReplaceAll(b, []byte(`"ID"`)) }
		if !bytes.Equal(norm(whole), norm(split)) {
			t.Fatalf("cut at %v:\n%s\nwhole:\n%s", cuts, split, whole)
		}
	})
}

// checkMessagesEvents checks a Messages answer: an Anthropic error
// envelope (nothing was streamed) or well-formed events, the stream
// ending with message_stop or error and nothing after either.
func checkMessagesEvents(t *testing.T, body []byte) {
	t.Helper()
	if bytes.HasPrefix(body, []byte(`{"type":"error"`)) {
		if !json.Valid(body) {
			t.Fatalf("error answer is not JSON: %q", body)
		}
		return
	}
	if len(body) == 0 {
		t.Fatal("no answer at all")
	}
	if !bytes.HasSuffix(body, []byte("\n\n")) {
		t.Fatalf("stream does not end with a blank line: %q", body)
	}
	events := strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n")
	for i, ev := range events {
		name, data, ok := strings.Cut(ev, "\ndata: ")
		if !ok || !strings.HasPrefix(name, "event: ") || strings.Contains(data, "\n") || !json.Valid([]byte(data)) {
			t.Fatalf("malformed event %q", ev)
		}
		name = strings.TrimPrefix(name, "event: ")
		var typ struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(data), &typ); err != nil || typ.Type != name {
			t.Fatalf("event %q carries type %q", name, typ.Type)
		}
		if i == 0 && name != "message_start" && name != "error" {
			t.Fatalf("first event %q", name)
		}
		if last := i == len(events)-1; last != (name == "message_stop" || name == "error") {
			t.Fatalf("event %d of %d is %q", i+1, len(events), name)
		}
	}
}
