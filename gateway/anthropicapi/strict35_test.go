package anthropicapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// Schemas strict mode refuses for what their values say: a pattern with a
// lookaround (OpenAI: "Invalid JSON schema: regex lookaround is not
// supported") or a backreference, and an enum or const value of a type
// the schema's type does not name. Escaped or in a character class, the
// same characters are no lookaround.
func TestStrictSchemaValues35(t *testing.T) {
	for _, c := range []struct {
		sub  string
		want bool
	}{
		{`{"type":"string","pattern":"^[a-z]+@[a-z]+\\.com$"}`, true},
		{`{"type":"string","pattern":"^\\(?=x\\)$"}`, true},       // \( is a parenthesis
		{`{"type":"string","pattern":"^[(?=!]+$"}`, true},         // in a class
		{`{"type":"string","pattern":"^[]\\[(?!]+$"}`, false},     // ']' first in a class: read two ways
		{`{"type":"string","pattern":"^[^](?<=]+$"}`, false},      // ']' first after '^': likewise
		{`{"type":"string","pattern":"^(?:ab)+(x)\\0$"}`, false},  // Rust's regex refuses \0
		{`{"type":"string","pattern":"^[\\1]$"}`, false},          // and \1 in a class
		{`{"type":"string","pattern":"^(?P<w>a)b$"}`, true},       // a named group, not a reference
		{`{"type":"string","pattern":"^(?=.*@).+$"}`, false},      // lookahead
		{`{"type":"string","pattern":"^(?!__).*$"}`, false},       // negative lookahead
		{`{"type":"string","pattern":"(?<=a)b"}`, false},          // lookbehind
		{`{"type":"string","pattern":"(?<!a)b"}`, false},          // negative lookbehind
		{`{"type":"string","pattern":"^[a](?=b)$"}`, false},       // after a class
		{`{"type":"string","pattern":"^\\\\(?=b)$"}`, false},      // after an escaped backslash
		{`{"type":"string","pattern":"^(a)\\1$"}`, false},         // backreference
		{`{"type":"string","pattern":"^(?<w>a)\\k<w>$"}`, false},  // named backreference
		{`{"type":"string","pattern":"^(?P<w>a)(?P=w)$"}`, false}, // Python's
		{`{"type":"string","pattern":7}`, false},

		{`{"type":"string","enum":["a","b"]}`, true},
		{`{"type":["string","null"],"enum":["a",null]}`, true},
		{`{"type":"integer","enum":[1,2,3.0]}`, true},
		{`{"type":"number","enum":[1,2.5]}`, true},
		{`{"type":"boolean","enum":[true]}`, true},
		{`{"type":"string","const":"x"}`, true},
		{`{"type":"null","const":null}`, true},
		{`{"type":"string","enum":["a",1]}`, false},
		{`{"type":"string","enum":["a",null]}`, false},
		{`{"type":"integer","enum":[1,2.5]}`, false},
		{`{"type":"integer","enum":[1e400]}`, false},
		{`{"type":"number","enum":["1"]}`, false},
		{`{"type":"string","enum":[{"a":1}]}`, false},
		{`{"type":"array","items":{"type":"string"},"enum":[["a"]]}`, false},
		{`{"type":"string","const":1}`, false},
		{`{"type":"string","const":null}`, false},
		{`{"anyOf":[{"type":"string"}],"enum":["a"]}`, false},
	} {
		if got := strictSchema(json.RawMessage(strict34rObject(c.sub))); got != c.want {
			t.Errorf("%s: strict %v, want %v", c.sub, got, c.want)
		}
	}
}

// A tool's strict: true is sent only when its input_schema meets strict
// mode, as a format's is; the tool itself is sent either way.
func TestToolStrictNeedsStrictSchema35(t *testing.T) {
	r := mustParse(t, `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"a"}],"tools":[
		{"name":"ok","input_schema":{"type":"object","additionalProperties":false,"properties":{"q":{"type":"string"}},"required":["q"]},"strict":true},
		{"name":"optional","input_schema":{"type":"object","additionalProperties":false,"properties":{"q":{"type":"string"}}},"strict":true},
		{"name":"open","input_schema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]},"strict":true},
		{"name":"look","input_schema":{"type":"object","additionalProperties":false,"properties":{"q":{"type":"string","pattern":"^(?!x)"}},"required":["q"]},"strict":true}]}`)
	chat, err := r.OpenAIChat()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Tools []struct {
			Function map[string]json.RawMessage `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(chat, &got); err != nil || len(got.Tools) != 4 {
		t.Fatalf("tools %s", chat)
	}
	for i, want := range []string{"true", "", "", ""} {
		if s := string(got.Tools[i].Function["strict"]); s != want {
			t.Errorf("tool %s: strict %q, want %q", got.Tools[i].Function["name"], s, want)
		}
		if !strings.Contains(string(got.Tools[i].Function["parameters"]), `"properties"`) {
			t.Errorf("tool %d: parameters %s", i, got.Tools[i].Function["parameters"])
		}
	}
}
