package openaiapi

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestRewriteModel(t *testing.T) {
	cases := []struct {
		name, in, target, want string
	}{
		{"simple", `{"model":"a","x":1}`, "t", `{"model":"t","x":1}`},
		{"whitespace kept", "{ \"x\" : 1 ,\n\t\"model\"  :  \"a\"  , \"y\":[ 1.50, 2e3 ] }", "t",
			"{ \"x\" : 1 ,\n\t\"model\"  :  \"t\"  , \"y\":[ 1.50, 2e3 ] }"},
		{"nested model untouched", `{"tools":[{"model":"keep"}],"meta":{"model":"keep2"},"model":"a"}`, "Qwen/Qwen2.5-7B",
			`{"tools":[{"model":"keep"}],"meta":{"model":"keep2"},"model":"Qwen/Qwen2.5-7B"}`},
		{"model inside string untouched", `{"p":"\"model\":\"x\"","model":"a"}`, "t", `{"p":"\"model\":\"x\"","model":"t"}`},
		{"escaped value replaced", `{"model":"a\"b\\c\u00e9","z":"\u2028"}`, "t", `{"model":"t","z":"\u2028"}`},
		{"escaped key", `{"\u006dodel":"a","b":"c"}`, "t", `{"\u006dodel":"t","b":"c"}`},
		{"non-string value", `{"model":{"a":[1,{"b":"}"}]},"x":null}`, "t", `{"model":"t","x":null}`},
		{"number value", `{"model":123}`, "t", `{"model":"t"}`},
		{"unicode target", `{"model":"a"}`, "模型/é<&>", `{"model":"模型/é<&>"}`},
		{"target needs escaping", `{"model":"a"}`, "a\"b\\\n", `{"model":"a\"b\\\n"}`},
		{"duplicates all rewritten", `{"model":"a","x":1,"model":"b"}`, "t", `{"model":"t","x":1,"model":"t"}`},
		{"missing inserted", `{ "x":1}`, "t", `{ "model":"t","x":1}`},
		{"missing empty", `{ }`, "t", `{"model":"t" }`},
		{"outer whitespace", "  \n{\"model\":\"a\"}\n ", "t", "  \n{\"model\":\"t\"}\n "},
		{"unicode around", `{"a":"日本語","model":"x","b":"🙂"}`, "t", `{"a":"日本語","model":"t","b":"🙂"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RewriteModel([]byte(tc.in), tc.target)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			var m map[string]any
			if err := json.Unmarshal(got, &m); err != nil || m["model"] != tc.target {
				t.Fatalf("decoded model = %v (%v)", m["model"], err)
			}
		})
	}
}

func TestRewriteModelLarge(t *testing.T) {
	// A multi-MiB body: the splice must keep every other byte.
	big := make([]byte, 0, 3<<20)
	big = append(big, `{"messages":[{"role":"user","content":"`...)
	for len(big) < 3<<20 {
		big = append(big, `abc \"model\" \u00e9 `...)
	}
	big = append(big, `"}],"model":"x"}`...)
	got, err := RewriteModel(big, "target")
	if err != nil {
		t.Fatal(err)
	}
	if want := string(big[:len(big)-3]) + `target"}`; string(got) != want {
		t.Fatal("large body changed beyond the model value")
	}
}

func TestRewriteModelErrors(t *testing.T) {
	for _, in := range []string{``, `[]`, `"model"`, `{"model":}`, `{"model":"a"`, `{"model":"a"}x`, `null`} {
		if _, err := RewriteModel([]byte(in), "t"); !errors.Is(err, ErrNotJSONObject) {
			t.Errorf("RewriteModel(%q) err = %v", in, err)
		}
		if _, err := withoutModel([]byte(in)); !errors.Is(err, ErrNotJSONObject) {
			t.Errorf("withoutModel(%q) err = %v", in, err)
		}
	}
}

func TestWithoutModel(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"first", `{"model":"a", "x":1}`, `{"x":1}`},
		{"middle", `{"x":1, "model":"a", "y":2}`, `{"x":1, "y":2}`},
		{"last", `{"x":1 , "model" : "a" }`, `{"x":1 }`},
		{"only", `{ "model":"a" }`, `{  }`},
		{"absent", `{"x":{"model":"keep"}}`, `{"x":{"model":"keep"}}`},
		{"nested kept", `{"model":"a","tools":[{"model":"keep"}]}`, `{"tools":[{"model":"keep"}]}`},
		{"escaped key", `{"x":1,"\u006dodel":"a"}`, `{"x":1}`},
		{"duplicates", `{"a":1,"model":"x","model":"y"}`, `{"a":1}`},
		{"duplicates apart", `{"model":"x","a":1,"model":"y","b":2}`, `{"a":1,"b":2}`},
		{"whitespace", "{\n  \"model\": \"a\",\n  \"messages\": []\n}", "{\n  \"messages\": []\n}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := withoutModel([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
			if !json.Valid(got) {
				t.Fatal("output is not valid JSON")
			}
		})
	}
	// The result never aliases the input.
	in := []byte(`{"x":1}`)
	out, _ := withoutModel(in)
	out[1] = 'Z'
	if in[1] != '"' {
		t.Fatal("withoutModel output aliases its input")
	}
}

// It is the oracle of the rewrite tests: a rewrite changed nothing
// but the model when both bodies are equal without it.
// withoutModel returns body without its top-level "model" member(s), for
// RunRequest.input (the wire never carries the external model). Like
// RewriteModel it splices: the member and exactly one adjacent comma are cut,
// every other byte is kept.
func withoutModel(body []byte) ([]byte, error) {
	out := body
	copied := false
	for {
		_, members, err := scanTopLevel(out)
		if err != nil {
			return nil, err
		}
		k := -1
		for i, m := range members {
			if m.isModel {
				k = i
				break
			}
		}
		if k < 0 {
			if !copied {
				out = append([]byte(nil), out...)
			}
			return out, nil
		}
		// Cut up to the next key, or, for the last member, from the end of the
		// previous value, so the separating comma goes with the member.
		from, to := members[k].keyStart, members[k].valEnd
		switch {
		case k+1 < len(members):
			to = members[k+1].keyStart
		case k > 0:
			from = members[k-1].valEnd
		}
		next := make([]byte, 0, len(out)-(to-from))
		next = append(next, out[:from]...)
		out = append(next, out[to:]...)
		copied = true
	}
}
