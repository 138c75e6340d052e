package openaiapi

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

func text(s string) *iop.ContentPart { return &iop.ContentPart{Part: &iop.ContentPart_Text{Text: s}} }

func f64(v float64) *float64 { return &v }

func TestNormalizeChatCarriesEveryField(t *testing.T) {
	body := `{"model":"m","messages":[
		{"role":"developer","content":"be brief"},
		{"role":"user","name":"ann","content":[{"type":"text","text":"what is"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA==","detail":"low"}}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"42"}],
	"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"},"strict":true}}],
	"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false,
	"temperature":0.5,"top_p":0.9,"top_k":40,"max_tokens":10,"max_completion_tokens":20,"stop":"END","seed":7,
	"presence_penalty":0.1,"frequency_penalty":0.2,
	"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object"},"strict":true}},
	"stream":true,"stream_options":{"include_usage":true},"logprobs":true,"chat_template_kwargs":{"enable_thinking":false}}`
	if _, err := ParseChat([]byte(body)); err != nil {
		t.Fatalf("ParseChat: %v", err)
	}
	got, err := NormalizeChat([]byte(body))
	if err != nil {
		t.Fatalf("NormalizeChat: %v", err)
	}
	no := false
	topK, seed := int32(40), int64(7)
	want := &iop.RunInput{
		Messages: []*iop.ChatMessage{
			{Role: iop.ChatRole_CHAT_ROLE_DEVELOPER, Content: []*iop.ContentPart{text("be brief")}},
			{Role: iop.ChatRole_CHAT_ROLE_USER, Name: "ann", Content: []*iop.ContentPart{text("what is"),
				{Part: &iop.ContentPart_Image{Image: &iop.ImagePart{Url: "data:image/png;base64,AA==", Detail: "low"}}}}},
			{Role: iop.ChatRole_CHAT_ROLE_ASSISTANT, ToolCalls: []*iop.ToolCall{{Id: "c1", Name: "f", Arguments: `{"x":1}`}}},
			{Role: iop.ChatRole_CHAT_ROLE_TOOL, ToolCallId: "c1", Content: []*iop.ContentPart{text("42")}},
		},
		Tools:             []*iop.ToolDefinition{{Name: "f", Description: "d", Parameters: []byte(`{"type":"object"}`), Strict: true}},
		ToolChoice:        &iop.ToolChoice{Mode: iop.ToolChoiceMode_TOOL_CHOICE_MODE_FUNCTION, FunctionName: "f"},
		ParallelToolCalls: &no,
		Sampling: &iop.Sampling{Temperature: f64(0.5), TopP: f64(0.9), TopK: &topK, MaxTokens: 20, Stop: []string{"END"},
			Seed: &seed, PresencePenalty: f64(0.1), FrequencyPenalty: f64(0.2)},
		ResponseFormat: &iop.ResponseFormat{Type: iop.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_SCHEMA, SchemaName: "s", Schema: []byte(`{"type":"object"}`), Strict: true},
		IncludeUsage:   true,
	}
	extra := got.Extra
	got.Extra = nil
	if !proto.Equal(got, want) {
		t.Fatalf("normalized:\n got %s\nwant %s", protojson.Format(got), protojson.Format(want))
	}
	var ex map[string]json.RawMessage
	if err := json.Unmarshal(extra, &ex); err != nil {
		t.Fatalf("extra %s: %v", extra, err)
	}
	if len(ex) != 3 || string(ex["logprobs"]) != "true" || ex["chat_template_kwargs"] == nil || ex["stream_options"] == nil {
		t.Fatalf("extra = %s, want logprobs, chat_template_kwargs and stream_options only", extra)
	}
}

// The run carries exactly the members ParseChat validated: encoding/json,
// which the normalizer used before, matched "Messages" or "ſtream" to its
// fields case-insensitively and merged duplicate objects, so a body could
// pass validation with one set of messages and run with another. ParseChat
// now refuses such case variants outright (members.go); the normalizer,
// given the body anyway, still reads only the exact members and passes
// the variants on as unknown ones.
func TestNormalizeReadsWhatWasValidated(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],
		"Messages":[{"role":"system","content":"unvalidated"},{"role":"user","content":"x"}],
		"ſtream":true,"stream_options":{"include_usage":true},"TOOLS":[{"type":"function","function":{"name":"g"}}],
		"tools":[{"type":"function","function":{"name":"f","description":"first"},"function":{"name":"f"}}],
		"seed":9007199254740993}`
	if _, err := ParseChat([]byte(body)); err == nil {
		t.Fatal("ParseChat accepted the case variants Messages, ſtream and TOOLS")
	} else if e := err.(*Error); e.Param == nil || *e.Param != "Messages" {
		t.Errorf("param = %v, want the least variant, Messages", e.Param)
	}
	in, err := NormalizeChat([]byte(body))
	if err != nil {
		t.Fatalf("NormalizeChat: %v", err)
	}
	if len(in.GetMessages()) != 1 || in.GetMessages()[0].GetContent()[0].GetText() != "hi" {
		t.Errorf("messages = %v, want the one exact member's", in.GetMessages())
	}
	if in.GetIncludeUsage() {
		t.Error("include_usage set: ſtream is not stream")
	}
	if len(in.GetTools()) != 1 || in.GetTools()[0].GetName() != "f" || in.GetTools()[0].GetDescription() != "" {
		t.Errorf("tools = %v, want f without the description of the function object that was replaced", in.GetTools())
	}
	if got := in.GetSampling().GetSeed(); got != 9007199254740993 {
		t.Errorf("seed = %d, want 9007199254740993 exactly", got)
	}
	var extra map[string]json.RawMessage
	if err := json.Unmarshal(in.GetExtra(), &extra); err != nil || extra["Messages"] == nil || extra["TOOLS"] == nil || extra["ſtream"] == nil {
		t.Errorf("extra = %s, want the unknown members Messages, TOOLS and ſtream passed on", in.GetExtra())
	}
	// ParseChat refuses the duplicate function object too; what it
	// accepts runs as validated, the seed exactly.
	exact := `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true},
		"tools":[{"type":"function","function":{"name":"f"}}],"seed":9007199254740993}`
	if _, err := ParseChat([]byte(strings.Replace(exact, `{"name":"f"}`, `{"name":"f","description":"first"},"function":{"name":"f"}`, 1))); err == nil {
		t.Error("ParseChat accepted a tool with two function objects")
	}
	req, err := ParseChat([]byte(exact))
	if err != nil {
		t.Fatalf("ParseChat: %v", err)
	}
	if in, err = req.RunInput(); err != nil {
		t.Fatalf("RunInput: %v", err)
	}
	if len(in.GetTools()) != 1 || in.GetTools()[0].GetName() != "f" || in.GetSampling().GetSeed() != 9007199254740993 {
		t.Errorf("run input = %v, want f and the exact seed", in)
	}
	// A float that rounds to 2^63 is not an int64 seed (it was read as -2^63).
	if _, err := ParseChat([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"seed":9.223372036854775807e18}`)); err == nil {
		t.Error("seed 2^63 accepted")
	}
}

func TestNormalizeRefusesWhatARunCannotCarry(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"custom","custom":{"name":"c"}}]}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":1.5}`,
	} {
		if _, err := NormalizeChat([]byte(body)); err == nil {
			t.Errorf("%s: normalized, want a 400", body)
		} else if e, ok := err.(*Error); !ok || e.Status != 400 {
			t.Errorf("%s: err = %v, want a 400 *Error", body, err)
		}
	}
}

func TestNormalizeCompletionAndEmbedding(t *testing.T) {
	in, err := NormalizeCompletion([]byte(`{"model":"m","prompt":["once"],"suffix":"end","max_tokens":3,"echo":true}`))
	if err != nil || in.GetPrompt() != "once" || in.GetSuffix() != "end" || in.GetSampling().GetMaxTokens() != 3 || string(in.GetExtra()) != `{"echo":true}` {
		t.Fatalf("completion = %v, %v", in, err)
	}
	if _, err := NormalizeCompletion([]byte(`{"model":"m","prompt":["a","b"]}`)); err == nil {
		t.Fatal("two prompts normalized for a run")
	}
	in, err = NormalizeEmbedding([]byte(`{"model":"m","input":["a","b"],"dimensions":8,"encoding_format":"float"}`))
	if err != nil || len(in.GetEmbedInputs()) != 2 || in.GetDimensions() != 8 || string(in.GetExtra()) != `{"encoding_format":"float"}` {
		t.Fatalf("embedding = %v, %v", in, err)
	}
	if _, err := NormalizeEmbedding([]byte(`{"model":"m","input":[[1,2]]}`)); err == nil {
		t.Fatal("token arrays normalized for a run")
	}
}

// FuzzNormalizeChat: whatever ParseChat accepts, NormalizeChat answers
// without panicking, either with an input of as many messages or with a
// 400.
func FuzzNormalizeChat(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","stop":["x"]}`))
	f.Add([]byte(`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"1","function":{"name":"f","arguments":{"a":1}}}]}],"seed":1e300}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ParseChat(body)
		if err != nil {
			return
		}
		in, err := NormalizeChat(body)
		if err != nil {
			if e, ok := err.(*Error); !ok || e.Status != 400 {
				t.Fatalf("err = %v, want a 400 *Error", err)
			}
			return
		}
		if len(in.GetMessages()) != req.MessageCount {
			t.Fatalf("%d messages normalized, %d parsed", len(in.GetMessages()), req.MessageCount)
		}
	})
}
