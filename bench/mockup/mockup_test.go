package mockup

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, url, body string, h map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestCompletion(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	resp := post(t, srv.URL, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil)
	var doc struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.Object != "chat.completion" || len(doc.Choices) != 1 || doc.Choices[0].Message.Content == "" || doc.Usage.CompletionTokens != 64 {
		t.Fatalf("unexpected completion: %+v", doc)
	}
}

func TestStreamPacing(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	start := time.Now()
	resp := post(t, srv.URL, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`,
		map[string]string{HeaderChunks: "5", HeaderInterval: "10"})
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	var events []string
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			events = append(events, strings.TrimSpace(data))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// 5 chunks, the usage chunk, [DONE]; 4 pauses of 10 ms.
	if len(events) != 7 || events[6] != "[DONE]" || !strings.Contains(events[5], `"completion_tokens":5`) || !strings.Contains(events[4], `"finish_reason":"stop"`) {
		t.Fatalf("events: %q", events)
	}
	for _, e := range events[:6] {
		if !json.Valid([]byte(e)) {
			t.Fatalf("invalid JSON event %q", e)
		}
	}
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Fatalf("stream took %s, want ≥ 40ms", d)
	}
}

func TestBadPacing(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	resp := post(t, srv.URL, `{"stream":true}`, map[string]string{HeaderChunks: "0"})
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", resp.StatusCode)
	}
}
