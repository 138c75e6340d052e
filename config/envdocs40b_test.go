package config

import (
	"strings"
	"testing"

	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// envSecret40b stands for a token in a node list held by a variable.
const envSecret40b = "Zq7TokenValue"

// FuzzEnvDocNeverQuoted40b: a list key's variable holds a YAML or JSON
// document, and a node list holds tokens, so whatever the document is
// (the token anywhere in it: a value, a key, an anchor, a tag, a
// directive) a problem names the variable and never quotes the document;
// a document that parses to a value sets the key and is no problem (one
// of only comments is no value, and keeps the file's, as a blank one).
func FuzzEnvDocNeverQuoted40b(f *testing.F) {
	for _, s := range [][2]string{
		{"- id: gpu-a\n  token: ", "\n  models: [a]\n"},
		{"- id: gpu-a\n  token: ", "\n bad: ["},
		{`[{"id":"gpu-a","token":"`, `"`},
		{`[{"id":"gpu-a","token":"`, `\q"}]`},
		{"- !!int ", ""},
		{"- !!", " x"},
		{"- !<", "> x"},
		{"%TAG !", "! tag:x\n--- !x!y z"},
		{"%", "\n---\nx"},
		{"- &", "\n- *other"},
		{"- *", ""},
		{"{", ": [}"},
		{"- \t", ": x\n  - y"},
		{"k: ", "\x01"},
		{"- !!binary ", ""},
		{"a: &a [x]\nb: [*a, ", "]\n"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pre, post string) {
		doc := pre + envSecret40b + post
		if strings.IndexByte(doc, 0) >= 0 {
			return // no environment variable holds a NUL
		}
		t.Setenv(envName("nodes"), doc)
		v := viper.New()
		p := applyEnvDocs(v, []string{"nodes"})
		if len(p) > 1 {
			t.Fatalf("%d problems for one variable: %q", len(p), p)
		}
		for _, line := range p {
			if strings.Contains(line, envSecret40b) || strings.Contains(line, envSecret40b[:7]) || strings.Contains(line, envSecret40b[6:]) {
				t.Fatalf("problem %q quotes the document %q", line, doc)
			}
			if !strings.HasPrefix(line, envName("nodes")+" (nodes): ") {
				t.Fatalf("problem %q does not name the variable", line)
			}
		}
		var parsed any
		if len(p) == 0 && yaml.Unmarshal([]byte(doc), &parsed) == nil && parsed != nil && !v.IsSet("nodes") {
			t.Fatalf("document %q: no problem, and the key is not set", doc)
		}
	})
}
