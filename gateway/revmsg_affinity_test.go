package gateway_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/iop-gateway/iop/config"
)

// A Messages conversation on prefix_affinity goes back to the provider
// that served its earlier turn, although the next turn carries that turn's
// thinking (the call's run rendering, with reasoning, is what is hashed);
// the vLLM tunnel sends that thinking as the assistant turn's reasoning. The earlier turn is steered to
// the second provider by a request held on the first, so that order alone
// (least_load's tie-break) would not pick it again.
func TestMessagesPrefixAffinityFollowsThinkingConversation(t *testing.T) {
	held, release := make(chan struct{}), make(chan struct{})
	a := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "chat") {
			if body, _ := io.ReadAll(r.Body); bytes.Contains(body, []byte("HOLD")) {
				close(held)
				<-release
			}
		}
		writeJSON(w, http.StatusOK, vllmChatJSON)
	})
	b := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, vllmChatJSON) })
	cfg := edgeConfig([]config.ProviderSpec{vllmProvider("a", a.baseURL()), vllmProvider("b", b.baseURL())})
	cfg.Models = []config.ModelSpec{{Name: "m", Routing: "prefix_affinity", Providers: []config.ModelProvider{
		{Node: nodeID, Provider: "a", Target: target}, {Node: nodeID, Provider: "b", Target: target}}}}
	e, _ := startStack(t, cfg)
	an := anClient(t, e, "")

	heldDone := make(chan error, 1)
	go func() { // Owner: this test; ends when release lets a answer.
		_, err := an.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "m", MaxTokens: 8,
			Messages: []anthropic.MessageParam{userText("HOLD " + strings.Repeat("z", 600))}})
		heldDone <- err
	}()
	<-held

	first := "Tell me about tides. " + strings.Repeat("Context that makes the prompt long. ", 30)
	if _, err := an.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "m", MaxTokens: 64,
		Messages: []anthropic.MessageParam{userText(first)}}); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-heldDone; err != nil {
		t.Fatal(err)
	}
	waitReleased(t, e, "a")
	waitReleased(t, e, "b")
	if n := len(b.requests()); n != 1 {
		t.Fatalf("b served %d requests, want the first turn", n)
	}

	if _, err := an.Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "m", MaxTokens: 64, Messages: []anthropic.MessageParam{
		userText(first),
		anthropic.NewAssistantMessage(anthropic.NewThinkingBlock("EqQBCkYIBxgC", "The moon, mostly."), anthropic.NewTextBlock("Hello! How can I help you today?")),
		userText("And the sun?"),
	}}); err != nil {
		t.Fatal(err)
	}
	reqs := b.requests()
	if len(reqs) != 2 {
		t.Fatalf("the next turn went to a (b served %d requests, a %d)", len(reqs), len(a.requests()))
	}
	if body := reqs[1].Body; !bytes.Contains(body, []byte(`"reasoning":"The moon, mostly."`)) || !bytes.Contains(body, []byte("And the sun?")) {
		t.Errorf("tunnel body %s", body)
	}
}
