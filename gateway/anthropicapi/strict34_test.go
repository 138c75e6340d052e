package anthropicapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// strictSchema sends strict only for schemas OpenAI's strict mode takes:
// every object closed (additionalProperties false) and requiring exactly
// its properties, down nested objects, array items, anyOf branches and
// $defs; only keywords strict mode takes; a local $ref; an object root.
func TestStrictSchema34(t *testing.T) {
	for _, c := range []struct {
		schema string
		want   bool
	}{
		{`{"type":"object","additionalProperties":false,"properties":{"name":{"type":"string"}},"required":["name"]}`, true},
		{`{"type":"object","additionalProperties":false}`, true},
		{`{"title":"Pick","type":"object","description":"d","additionalProperties":false,"properties":{"n":{"type":"integer","minimum":1,"maximum":9},` +
			`"s":{"type":["string","null"],"pattern":"^a","format":"date"},"e":{"type":"string","enum":["a","b"]},"c":{"type":"string","const":"x"},` +
			`"l":{"type":"array","items":{"$ref":"#/$defs/item"},"minItems":1,"maxItems":3},` +
			`"u":{"anyOf":[{"type":"string"},{"$ref":"#"}]}},"required":["n","s","e","c","l","u"],` +
			`"$defs":{"item":{"type":"object","additionalProperties":false,"properties":{"k":{"type":"number"}},"required":["k"]}}}`, true},
		// Anthropic takes these; OpenAI's strict mode refuses them.
		{`{"type":"object","additionalProperties":false,"properties":{"name":{"type":"string"},"email":{"type":"string"}},"required":["name"]}`, false},
		{`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`, false},
		{`{"type":"object","additionalProperties":true,"properties":{},"required":[]}`, false},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"object","properties":{"b":{"type":"string"}},"required":["b"]}},"required":["a"]}`, false},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"array","items":{"type":"object","properties":{}}}},"required":["a"]}`, false},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"anyOf":[{"type":"object","properties":{"x":{"type":"string"}}}]}},"required":["a"]}`, false},
		{`{"type":"object","additionalProperties":false,"$defs":{"d":{"type":"object"}}}`, false},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string","default":"x"}},"required":["a"]}`, false},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string","minLength":1}},"required":["a"]}`, false},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"allOf":[{"type":"string"}]}},"required":["a"]}`, false},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"$ref":"https://example.com/s.json"}},"required":["a"]}`, false},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"}},"required":["a","a"]}`, false},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"}},"required":["b"]}`, false},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a","a"]}`, false},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"}},"required":"a"}`, false},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"}},"required":["a"],"$schema":"http://json-schema.org/draft-07/schema#"}`, false},
		{`{"anyOf":[{"type":"object","additionalProperties":false}]}`, false},
		{`{"type":"array","items":{"type":"string"}}`, false},
		{`{"title":"Old"}`, false},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string","enum":{}}},"required":["a"]}`, false},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"anyOf":[]}},"required":["a"]}`, false},
	} {
		if got := strictSchema(json.RawMessage(c.schema)); got != c.want {
			t.Errorf("%s: strict %v, want %v", c.schema, got, c.want)
		}
	}
}

// strictNested is a strict object schema nesting depth objects.
func strictNested(depth int) string {
	return strings.Repeat(`{"type":"object","additionalProperties":false,"properties":{"a":`, depth) + `{"type":"string"}` +
		strings.Repeat(`},"required":["a"]}`, depth)
}

// strictWide is a strict object schema with n properties, each an enum
// of one value.
func strictWide(n int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","additionalProperties":false,"properties":{`)
	var req []string
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d":{"type":"string","enum":["v"]}`, i)
		req = append(req, fmt.Sprintf(`"p%d"`, i))
	}
	b.WriteString(`},"required":[` + strings.Join(req, ",") + `]}`)
	return b.String()
}

// The walk of a client's schema is bounded as OpenAI bounds a strict one:
// past 10 levels, 5,000 schemas, 1,000 enum values or 120,000 characters
// of names and values strict is left out, and a schema nested far deeper
// (as deep as the body allows) is refused at once.
func TestStrictSchemaBounds34(t *testing.T) {
	for _, c := range []struct {
		name   string
		schema string
		want   bool
	}{
		{"depth 9", strictNested(9), true},
		{"depth 10", strictNested(10), false},
		{"depth 5000", strictNested(5000), false},
		{"1000 enums", strictWide(1000), true},
		{"1001 enums", strictWide(1001), false},
		{"long names", `{"type":"object","additionalProperties":false,"properties":{"` + strings.Repeat("n", 120001) + `":{"type":"string"}},"required":["` + strings.Repeat("n", 120001) + `"]}`, false},
		{"long enum", `{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string","enum":["` + strings.Repeat("v", 120001) + `"]}},"required":["a"]}`, false},
	} {
		if got := strictSchema(json.RawMessage(c.schema)); got != c.want {
			t.Errorf("%s: strict %v, want %v", c.name, got, c.want)
		}
	}
	// 5,001 schemas, none of them an enum: past the node bound.
	wide := strings.ReplaceAll(strictWide(5001), `{"type":"string","enum":["v"]}`, `{"type":"string"}`)
	if strictSchema(json.RawMessage(wide)) {
		t.Error("5,001 properties: strict")
	}
	if !strictSchema(json.RawMessage(strings.ReplaceAll(strictWide(4000), `{"type":"string","enum":["v"]}`, `{"type":"string"}`))) {
		t.Error("4,000 properties: not strict")
	}
	// 5,001 schemas in one property's anyOf: past the node bound with one
	// property only.
	branches := `{"type":"object","additionalProperties":false,"properties":{"a":{"anyOf":[` +
		strings.TrimSuffix(strings.Repeat(`{"type":"string"},`, 5001), ",") + `]}},"required":["a"]}`
	if strictSchema(json.RawMessage(branches)) {
		t.Error("5,001 anyOf branches: strict")
	}
}
