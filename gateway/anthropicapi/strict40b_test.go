package anthropicapi

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

// strictSpec40b checks, apart from strictSchema's own walk, what OpenAI's
// strict mode refuses a schema without, on v (a schema at nesting depth):
// a map of known keywords only; a $ref alone, naming "#" or a pointer; any
// other schema with a type or an anyOf; an object (properties, or a type
// naming object) with additionalProperties false and required naming each
// property once; and the same of every schema within (properties, items,
// anyOf branches, definitions), none deeper than maxStrictDepth.
func strictSpec40b(t *testing.T, v any, depth int) {
	t.Helper()
	s, ok := v.(map[string]any)
	if !ok || depth > maxStrictDepth {
		t.Fatalf("strict with a schema %v at depth %d", v, depth)
	}
	for k := range s {
		if !strictKeywords[k] {
			t.Fatalf("strict with keyword %q", k)
		}
	}
	if ref, ok := s["$ref"]; ok {
		r, _ := ref.(string)
		if len(s) != 1 || r != "#" && (len(r) < 2 || r[:2] != "#/") {
			t.Fatalf("strict with $ref %v beside %d members", ref, len(s)-1)
		}
		return
	}
	_, hasType := s["type"]
	_, hasAnyOf := s["anyOf"]
	if !hasType && !hasAnyOf {
		t.Fatalf("strict with a schema of no type: %v", s)
	}
	props, hasProps := s["properties"].(map[string]any)
	if hasProps || typeIncludes(s["type"], "object") {
		required, _ := s["required"].([]any)
		var names []string
		for _, r := range required {
			n, _ := r.(string)
			names = append(names, n)
		}
		slices.Sort(names)
		var keys []string
		for k := range props {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if s["additionalProperties"] != false || !slices.Equal(names, keys) {
			t.Fatalf("strict with an object whose additionalProperties is %v and required %v for %v", s["additionalProperties"], names, keys)
		}
	}
	for _, sub := range props {
		strictSpec40b(t, sub, depth+1)
	}
	for _, defs := range []any{s["$defs"], s["definitions"]} {
		m, _ := defs.(map[string]any)
		for _, sub := range m {
			strictSpec40b(t, sub, depth+1)
		}
	}
	if items, ok := s["items"]; ok {
		strictSpec40b(t, items, depth+1)
	}
	if list, ok := s["anyOf"].([]any); ok {
		for _, sub := range list {
			strictSpec40b(t, sub, depth+1)
		}
	}
}

// FuzzStrictSchemaMeetsStrictMode40b: a client's output format or strict
// tool schema is sent with strict only when strictSchema takes it, and
// OpenAI refuses the whole request for a strict schema outside its rules.
// Whatever schema a client sends, one taken meets them (strictSpec40b),
// and taking away the root's additionalProperties false, or adding a
// keyword strict mode does not know, makes it one not taken.
func FuzzStrictSchemaMeetsStrictMode40b(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"type":"string","enum":["a","b"]}},"at":{"type":["string","null"],"format":"date-time"}},"required":["name","tags","at"],"additionalProperties":false}`,
		`{"type":"object","$defs":{"n":{"type":"object","properties":{"next":{"anyOf":[{"$ref":"#/$defs/n"},{"type":"null"}]}},"required":["next"],"additionalProperties":false}},"properties":{"head":{"$ref":"#/$defs/n"}},"required":["head"],"additionalProperties":false}`,
		`{"type":"object","properties":{"a":{"type":"object","properties":{},"required":[],"additionalProperties":false}},"required":["a"],"additionalProperties":false}`,
		`{"type":"object","properties":{"x":{"type":"integer","minimum":0,"const":3}},"required":["x"],"additionalProperties":false}`,
		`{"type":"object","properties":{"x":{"type":"string"}},"required":[],"additionalProperties":false}`,
		`{"type":"object","additionalProperties":false,"properties":{"p":{"type":"string","pattern":"^(?!a)"}},"required":["p"]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, schema []byte) {
		var buf bytes.Buffer
		if json.Compact(&buf, schema) != nil || len(schema) == 0 || schema[0] != '{' {
			return // parseFormat passes a compact JSON object only
		}
		compact := buf.Bytes()
		if !strictSchema(compact) {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(compact))
		dec.UseNumber()
		var root map[string]any
		if err := dec.Decode(&root); err != nil {
			t.Fatal(err)
		}
		strictSpec40b(t, root, 1)
		for name, change := range map[string]func(m map[string]any){
			"no additionalProperties": func(m map[string]any) { delete(m, "additionalProperties") },
			"an unknown keyword":      func(m map[string]any) { m["minLength"] = 1 },
		} {
			var m map[string]any
			if err := json.Unmarshal(compact, &m); err != nil {
				t.Fatal(err)
			}
			change(m)
			changed, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if strictSchema(changed) {
				t.Fatalf("strict with %s: %s", name, changed)
			}
		}
	})
}
