package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
)

// A Messages stream whose first event is the upstream's error is answered
// with that error's status and envelope at once, not when the upstream's
// stream ends: here the upstream sends its error event and then holds the
// stream open (a broken upstream that hangs after its error; the stream
// idle timeout is minutes). The client has its whole 429, Retry-After
// included, while the upstream still holds; once it lets go, the lease
// comes back.
func TestMessagesStreamFirstEventErrorNotHeld35r(t *testing.T) {
	release := make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	t.Cleanup(free)
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "5")
		writeSSE(w, `data: {"error":{"message":"Rate limit reached","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`+"\n\n")
		select {
		case <-release:
		case <-r.Context().Done():
		}
		_, _ = w.Write([]byte("data: [DONE]\n\n"))
	})
	s := tunnelStack(t, u)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	r, err := tryDo(ctx, httpClient(t), http.MethodPost, s.Edge.URL+"/v1/messages",
		`{"model":"qwen-7b","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"x"}]}`, nil)
	if err != nil {
		t.Fatalf("the error was not answered while the upstream held its stream: %v", err)
	}
	var env struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "5" || json.Unmarshal(r.Body, &env) != nil ||
		env.Type != "error" || env.Error.Type != "rate_limit_error" {
		t.Fatalf("%d, Retry-After %q: %s", r.Status, r.Header.Get("Retry-After"), r.Body)
	}
	free()
	waitReleased(t, s.Edge, "vllm-main")
}
