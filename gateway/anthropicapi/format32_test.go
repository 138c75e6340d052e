package anthropicapi

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/iop-gateway/iop/gateway/openaiapi"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// bothChats parses body with ParseRequest and ParseCountRequest and
// returns the chat body each renders, failing the test on a refusal.
func bothChats(t *testing.T, body string) [][]byte {
	t.Helper()
	var out [][]byte
	for _, parse := range []func([]byte) (*Request, *Error){ParseRequest, ParseCountRequest} {
		r, e := parse([]byte(body))
		if e != nil {
			t.Fatalf("%s: %v", body, e)
		}
		chat, err := r.OpenAIChat()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, chat)
	}
	return out
}

// formatChat parses body (count_tokens' parser too) and returns its chat
// body's response_format ("" when none), the same from both.
func formatChat(t *testing.T, body string) string {
	t.Helper()
	var got []string
	for _, chat := range bothChats(t, body) {
		var out struct {
			ResponseFormat json.RawMessage `json:"response_format"`
		}
		if err := json.Unmarshal(chat, &out); err != nil {
			t.Fatal(err)
		}
		got = append(got, string(out.ResponseFormat))
	}
	if got[0] != got[1] {
		t.Errorf("%s: response_format %s from ParseRequest, %s from ParseCountRequest", body, got[0], got[1])
	}
	return got[0]
}

// output_config.format (and the deprecated top-level output_format) becomes
// OpenAI's response_format: json_schema, the schema compacted as sent,
// named after the schema's title when that is a valid OpenAI name,
// else "response"; output_config.format wins over output_format. Without a
// format (absent, null) the body has none. None of these schemas meets
// OpenAI's strict mode, so none is strict (strict34_test.go).
func TestParseOutputConfigFormat(t *testing.T) {
	const msgs = `"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct{ members, want string }{
		{`"output_config":{"format":{"type":"json_schema","schema":{ "type" : "object" }}}`,
			`{"type":"json_schema","json_schema":{"name":"response","schema":{"type":"object"}}}`},
		{`"output_config":{"effort":"low","format":{"type":"json_schema","schema":{"title":"Contact_Info-2","type":"object"}}}`,
			`{"type":"json_schema","json_schema":{"name":"Contact_Info-2","schema":{"title":"Contact_Info-2","type":"object"}}}`},
		{`"output_config":{"format":{"type":"json_schema","schema":{"title":"Contact info","type":"object"}}}`,
			`{"type":"json_schema","json_schema":{"name":"response","schema":{"title":"Contact info","type":"object"}}}`},
		{`"output_config":{"format":{"type":"json_schema","schema":{"title":"A123456789012345678901234567890123456789012345678901234567890123"}}}`,
			`{"type":"json_schema","json_schema":{"name":"A123456789012345678901234567890123456789012345678901234567890123","schema":{"title":"A123456789012345678901234567890123456789012345678901234567890123"}}}`},
		{`"output_config":{"format":{"type":"json_schema","schema":{"title":"A1234567890123456789012345678901234567890123456789012345678901234"}}}`,
			`{"type":"json_schema","json_schema":{"name":"response","schema":{"title":"A1234567890123456789012345678901234567890123456789012345678901234"}}}`},
		{`"output_config":{"format":{"type":"json_schema","schema":{"title":7}}}`,
			`{"type":"json_schema","json_schema":{"name":"response","schema":{"title":7}}}`},
		{`"output_format":{"type":"json_schema","schema":{"title":"Old"}}`,
			`{"type":"json_schema","json_schema":{"name":"Old","schema":{"title":"Old"}}}`},
		{`"output_format":{"type":"json_schema","schema":{"title":"Old"}},"output_config":{"format":{"type":"json_schema","schema":{"title":"New"}}}`,
			`{"type":"json_schema","json_schema":{"name":"New","schema":{"title":"New"}}}`},
		{`"output_config":{"format":null}`, ``},
		{`"output_config":{"effort":"low"}`, ``},
		{`"output_format":null`, ``},
		{`"metadata":{}`, ``},
	} {
		got := formatChat(t, `{`+msgs+`,`+c.members+`}`)
		if c.want == "" {
			if got != "" {
				t.Errorf("%s: response_format %s, want none", c.members, got)
			}
			continue
		}
		if got != compact(t, c.want) {
			t.Errorf("%s:\n got %s\nwant %s", c.members, got, c.want)
		}
	}
}

// A format Anthropic's API refuses is a 400 invalid_request_error naming
// the field, on count_tokens too.
func TestParseOutputConfigFormatRefused(t *testing.T) {
	for in, msg := range map[string]string{
		`"output_config":{"format":"json_schema"}`:                                         "output_config.format: expected an object",
		`"output_config":{"format":{}}`:                                                    "output_config.format.type: Field required",
		`"output_config":{"format":{"type":null,"schema":{}}}`:                             "output_config.format.type: Field required",
		`"output_config":{"format":{"type":"json_object","schema":{}}}`:                    `output_config.format.type: must be "json_schema"`,
		`"output_config":{"format":{"type":"text"}}`:                                       `output_config.format.type: must be "json_schema"`,
		`"output_config":{"format":{"type":1,"schema":{}}}`:                                "output_config.format.type: expected a string",
		`"output_config":{"format":{"type":"json_schema"}}`:                                "output_config.format.schema: Field required",
		`"output_config":{"format":{"type":"json_schema","schema":null}}`:                  "output_config.format.schema: Field required",
		`"output_config":{"format":{"type":"json_schema","schema":true}}`:                  "output_config.format.schema: expected an object",
		`"output_config":{"format":{"type":"json_schema","schema":[{"type":"x"}]}}`:        "output_config.format.schema: expected an object",
		`"output_config":{"format":{"type":"json_schema","schema":"{}"}}`:                  "output_config.format.schema: expected an object",
		`"output_format":{"type":"json_schema"}`:                                           "output_format.schema: Field required",
		`"output_format":{"type":"json_schema","schema":{}},"output_config":{"format":{}}`: "output_config.format.type: Field required",
		`"output_format":[],"output_config":{"format":{"type":"json_schema","schema":{}}}`: "output_format: expected an object",
	} {
		body := `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}],` + in + `}`
		for _, parse := range []func([]byte) (*Request, *Error){ParseRequest, ParseCountRequest} {
			_, e := parse([]byte(body))
			if e == nil || e.Status != http.StatusBadRequest || e.Type != TypeInvalidRequest || e.Message != msg {
				t.Errorf("%s: %+v, want a 400 %q", in, e, msg)
			}
		}
	}
}

// The chat body's response_format is what the run path reads: the parsed
// chat's run input carries it as a JSON-schema ResponseFormat, named,
// with the schema's bytes, not strict (an optional property, which
// OpenAI's strict mode refuses); the tunnel's body carries it as the
// run's does.
func TestOutputFormatReachesRunInput(t *testing.T) {
	r := mustParse(t, `{"model":"m","max_tokens":64,"output_config":{"format":{"type":"json_schema","schema":{"title":"Pick","type":"object","properties":{"n":{"type":"integer"}}}}},"messages":[`+
		`{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"yo"}]},{"role":"user","content":"pick"}]}`)
	run, err := r.OpenAIChat()
	if err != nil {
		t.Fatal(err)
	}
	req, err := openaiapi.ParseChat(run)
	if err != nil {
		t.Fatal(err)
	}
	in, err := req.RunInput()
	if err != nil {
		t.Fatal(err)
	}
	rf := in.GetResponseFormat()
	if rf.GetType() != iop.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_SCHEMA || rf.GetSchemaName() != "Pick" || rf.GetStrict() ||
		string(rf.GetSchema()) != `{"title":"Pick","type":"object","properties":{"n":{"type":"integer"}}}` {
		t.Errorf("run response format %v", rf)
	}
	for _, member := range []ReasoningMember{ReasoningNone, ReasoningContent} {
		tunnel, err := r.TunnelChat(run, member)
		if err != nil {
			t.Fatal(err)
		}
		var a, b struct {
			ResponseFormat json.RawMessage `json:"response_format"`
		}
		if json.Unmarshal(run, &a) != nil || json.Unmarshal(tunnel, &b) != nil || string(a.ResponseFormat) != string(b.ResponseFormat) || len(b.ResponseFormat) == 0 {
			t.Errorf("member %q: tunnel response_format %s, run %s", member, b.ResponseFormat, a.ResponseFormat)
		}
	}
}
