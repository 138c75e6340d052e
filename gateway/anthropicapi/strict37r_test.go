package anthropicapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// strictProps is a strict object schema with n properties, each the
// schema prop.
func strictProps(n int, prop string) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","additionalProperties":false,"properties":{`)
	var req []string
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d":%s`, i, prop)
		req = append(req, fmt.Sprintf(`"p%d"`, i))
	}
	b.WriteString(`},"required":[` + strings.Join(req, ",") + `]}`)
	return b.String()
}

// OpenAI bounds a strict schema's object properties (5,000 in all) and
// its nesting, not the schemas inside a property: a property that is an
// array (its items a schema of its own) or an optional value (anyOf
// null and a type) is one property. The walk counted every schema
// against the same 5,000 as the properties, so 2,501 arrays, 1,667
// optional values, or 5,000 properties one of which is an array, were
// sent without strict though OpenAI takes each.
func TestStrictSchemaCountsPropertiesNotTheirSubschemas37r(t *testing.T) {
	defs := func(n int) string {
		d := make([]string, n)
		for i := range d {
			d[i] = fmt.Sprintf(`"d%d":{"type":"string"}`, i)
		}
		return `{"type":"object","additionalProperties":false,"properties":{},"required":[],"$defs":{` + strings.Join(d, ",") + `}}`
	}
	for _, c := range []struct {
		name   string
		schema string
		want   bool
	}{
		{"2,501 arrays", strictProps(2501, `{"type":"array","items":{"type":"string"}}`), true},
		{"1,667 optional values", strictProps(1667, `{"anyOf":[{"type":"null"},{"type":"string"}]}`), true},
		{"5,000 properties, one an array", strings.Replace(strictProps(5000, `{"type":"string"}`), `"p0":{"type":"string"}`, `"p0":{"type":"array","items":{"type":"string"}}`, 1), true},
		{"5,001 arrays", strictProps(5001, `{"type":"array","items":{"type":"string"}}`), false},
		// The schemas that are not properties (items, anyOf branches,
		// definitions) keep the walk's own bound of 5,000.
		{"5,000 branches", `{"type":"object","additionalProperties":false,"properties":{"a":{"anyOf":[` +
			strings.TrimSuffix(strings.Repeat(`{"type":"string"},`, 5000), ",") + `]}},"required":["a"]}`, true},
		{"5,001 branches", `{"type":"object","additionalProperties":false,"properties":{"a":{"anyOf":[` +
			strings.TrimSuffix(strings.Repeat(`{"type":"string"},`, 5001), ",") + `]}},"required":["a"]}`, false},
		{"5,000 definitions", defs(5000), true},
		{"5,001 definitions", defs(5001), false},
	} {
		if got := strictSchema(json.RawMessage(c.schema)); got != c.want {
			t.Errorf("%s: strict %v, want %v", c.name, got, c.want)
		}
	}
}
