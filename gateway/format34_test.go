package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/iop-gateway/iop/config"
)

// format34Schema is the response_format an OpenAI client sends for
// format34Body's JSON.
const (
	format34Body   = `{"type":"object","additionalProperties":false,"properties":{"name":{"type":"string"}},"required":["name"]}`
	format34Schema = `{"type":"json_schema","json_schema":{"name":"Contact","strict":true,"schema":` + format34Body + `}}`
)

// format34Tools offers one tool the model may call.
const format34Tools = `[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{}}}}]`

// format34Chat is an OpenAI chat body on model m asking for
// format34Schema, with tools and tool_choice when not empty.
func format34Chat(m string, stream bool, tools, toolChoice string) string {
	b := `{"model":"` + m + `","messages":[{"role":"user","content":"Who wrote it?"}],"response_format":` + format34Schema
	if stream {
		b += `,"stream":true`
	}
	if tools != "" {
		b += `,"tools":` + tools
	}
	if toolChoice != "" {
		b += `,"tool_choice":` + toolChoice
	}
	return b + "}"
}

// checkFormat34 checks the response_format of chat, a chat body a provider
// of type typ got: none beside tools the model may call for vLLM and
// llama-server, whose constrained decoding would keep the model from
// calling one; want otherwise.
func checkFormat34(t *testing.T, typ string, chat map[string]json.RawMessage, want string) {
	t.Helper()
	callable := chat["tools"] != nil && string(chat["tool_choice"]) != `"none"`
	if typ != "openai_compat" && callable {
		if rf, ok := chat["response_format"]; ok {
			t.Errorf("%s with callable tools got response_format %s", typ, rf)
		}
		return
	}
	jsonEqual(t, string(chat["response_format"]), want)
}

// The OpenAI chat surface forwards the client's request as the client
// wrote it: a response_format beside tools the model may call reaches
// vLLM, llama-server and OpenAI (openai_compat) unchanged, in either order
// of a failover, on a run (tool_mode auto) and a tunnel (native), whatever
// the tool_choice; only Messages, iop's own translation, leaves it out
// (TestMessagesFormatWithToolsByProviderKind).
func TestChatFormatWithToolsByProviderKind(t *testing.T) {
	for _, c := range formatFailoverPairs {
		t.Run(c.first+"_then_"+c.second+"_"+c.toolMode, func(t *testing.T) {
			first, second, e := thinkoffFailover(t, c.first, c.second, func(cfg *config.Edge) {
				for i := range cfg.Nodes[0].Providers {
					cfg.Nodes[0].Providers[i].ToolMode = c.toolMode
				}
			})
			bodies := []string{
				format34Chat("m", false, format34Tools, ""),
				format34Chat("m", true, format34Tools, `"auto"`),
				format34Chat("m", false, format34Tools, `"required"`),
				format34Chat("m", false, format34Tools, `"none"`),
				format34Chat("m", false, "", ""),
			}
			for _, b := range bodies {
				if r := post(t, e, "/v1/chat/completions", b); r.Status != http.StatusOK {
					t.Fatalf("%s: %d %s", b, r.Status, r.Body)
				}
			}
			n, tools := 0, 0
			eachFailoverChat(t, len(bodies), first, second, c.first, c.second, func(typ string, chat map[string]json.RawMessage) {
				jsonEqual(t, string(chat["response_format"]), format34Schema)
				if chat["tools"] != nil {
					tools++
				}
				n++
			})
			if n != 2*len(bodies) || tools != 2*(len(bodies)-1) {
				t.Errorf("%d chats checked, %d with tools", n, tools)
			}
		})
	}
}

// Ollama samples the whole completion under its format's grammar, so a
// Messages call with tools the model may call reaches /api/chat without
// format; without tools it keeps the format. An OpenAI chat reaches it as
// the client wrote it: format beside tools, streamed or not. Each request
// is checked on the one /api/chat body the node sent for it.
func TestFormatWithToolsOllama(t *testing.T) {
	e, u := histOllamaStack(t)
	seen := 0
	next := func(what string) map[string]json.RawMessage {
		t.Helper()
		bodies := histOllamaBodies(u, "/api/chat")
		if len(bodies) != seen+1 {
			t.Fatalf("%s: Ollama got %d chats, want %d", what, len(bodies), seen+1)
		}
		seen++
		if bodies[seen-1] == nil {
			t.Fatalf("%s: /api/chat body is not a JSON object", what)
		}
		return bodies[seen-1]
	}
	an := anClient(t, e, "")
	for _, stream := range []bool{false, true} {
		p := formatParams("qwen")
		p.Tools = []anthropic.ToolUnionParam{formatTool}
		sendMessage(t, an, p, stream)
		if b := next("messages with tools"); b["format"] != nil || b["tools"] == nil {
			t.Errorf("messages, stream %v: format %s, tools %s", stream, b["format"], b["tools"])
		}
		sendMessage(t, an, formatParams("qwen"), stream)
		jsonEqual(t, string(next("messages")["format"]), formatWantSchema(t))

		for _, choice := range []string{"", `"auto"`, `"required"`} {
			if r := post(t, e, "/v1/chat/completions", format34Chat("qwen", stream, format34Tools, choice)); r.Status != http.StatusOK {
				t.Fatalf("chat: %d %s", r.Status, r.Body)
			}
			b := next("chat with tools")
			if b["tools"] == nil {
				t.Errorf("chat, stream %v, tool_choice %s: no tools", stream, choice)
			}
			jsonEqual(t, string(b["format"]), format34Body)
		}
		if r := post(t, e, "/v1/chat/completions", format34Chat("qwen", stream, "", "")); r.Status != http.StatusOK {
			t.Fatalf("chat: %d %s", r.Status, r.Body)
		}
		jsonEqual(t, string(next("chat")["format"]), format34Body)
	}
}
