package anthropicapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// strict34rObject is a strict root whose one property "a" is sub.
func strict34rObject(sub string) string {
	return `{"type":"object","additionalProperties":false,"properties":{"a":` + sub + `},"required":["a"],` +
		`"$defs":{"d":{"type":"string"},"a/b~c":{"type":"string"}}}`
}

// Schemas strict mode refuses though every object is closed and requires
// all its properties: a schema without a type ("schema must have a 'type'
// key", an anyOf or a lone $ref excepted), a type it does not know, a
// format outside its list ("'uri' is not a valid format"), a $ref beside
// other keywords or naming nothing, and an anyOf beside the root's type.
func TestStrictSchemaRefused34r(t *testing.T) {
	for _, c := range []struct {
		sub  string
		want bool
	}{
		{`{"type":"string"}`, true},
		{`{"type":["string","null"]}`, true},
		{`{"type":["integer","null"],"minimum":0}`, true},
		{`{"type":"string","enum":["x","y"]}`, true},
		{`{"type":"string","format":"date-time"}`, true},
		{`{"type":"string","format":"uuid"}`, true},
		{`{"anyOf":[{"type":"string"},{"type":"null"}]}`, true},
		{`{"$ref":"#/$defs/d"}`, true},
		{`{"$ref":"#/$defs/a~1b~0c"}`, true},
		{`{"$ref":"#"}`, true},
		{`{"type":"array","items":{"$ref":"#/properties/a"}}`, true},

		{`{}`, false},
		{`{"description":"any"}`, false},
		{`{"enum":["x","y"]}`, false},
		{`{"const":"x"}`, false},
		{`{"type":"array","items":{}}`, false},
		{`{"type":"text"}`, false},
		{`{"type":7}`, false},
		{`{"type":[]}`, false},
		{`{"type":["string",null]}`, false},
		{`{"type":["string","string"]}`, false},
		{`{"type":"string","format":"uri"}`, false},
		{`{"type":"string","format":"date-time2"}`, false},
		{`{"type":"string","format":7}`, false},
		{`{"$ref":"#/$defs/d","description":"d"}`, false},
		{`{"$ref":"#/$defs/missing"}`, false},
		{`{"$ref":"#/$defs/d/type"}`, false},
		{`{"$ref":"#/$defs/d/type/x"}`, false},
		{`{"$ref":"#/required/0"}`, false},
		{`{"$ref":"#d"}`, false},
		{`{"$ref":"other.json#/x"}`, false},
		{`{"$ref":7}`, false},
		// Object keywords on a schema that is not an object.
		{`{"type":"string","additionalProperties":false}`, false},
		{`{"type":"string","required":[]}`, false},
		// A const counts toward the 120,000 characters.
		{`{"type":"string","const":"` + strings.Repeat("c", 120000) + `"}`, false},
		{`{"type":"string","const":"` + strings.Repeat("c", 119990) + `"}`, true},
	} {
		schema := strict34rObject(c.sub)
		if got := strictSchema(json.RawMessage(schema)); got != c.want {
			t.Errorf("%.80s: strict %v, want %v", c.sub, got, c.want)
		}
	}
	if strictSchema(json.RawMessage(`{"type":"object","additionalProperties":false,"anyOf":[{"type":"object","additionalProperties":false}]}`)) {
		t.Error("anyOf at the root: strict")
	}
}

// strict34rEnum is a strict schema whose one property is a string enum of
// n values of size bytes each, the first extra bytes longer.
func strict34rEnum(n, size, extra int) string {
	vals := make([]string, n)
	for i := range vals {
		v := fmt.Sprintf("%d", i)
		vals[i] = `"` + v + strings.Repeat("x", size-len(v)) + `"`
	}
	vals[0] = vals[0][:1] + strings.Repeat("y", extra) + vals[0][1:]
	return strict34rObject(`{"type":"string","enum":[` + strings.Join(vals, ",") + `]}`)
}

// One string enum of more than 250 values holds at most 15,000
// characters of them; 250 values may hold more.
func TestStrictSchemaLongEnum34r(t *testing.T) {
	for _, c := range []struct {
		n, size, extra int
		want           bool
	}{
		{251, 59, 0, true},   // 14,809
		{300, 50, 0, true},   // 15,000
		{300, 50, 1, false},  // 15,001
		{300, 51, 0, false},  // 15,300
		{250, 100, 0, true},  // 25,000, but not more than 250 values
		{251, 60, 0, false},  // 15,060
		{251, 59, 191, true}, // 15,000
		{251, 59, 192, false},
	} {
		if got := strictSchema(json.RawMessage(strict34rEnum(c.n, c.size, c.extra))); got != c.want {
			t.Errorf("%d values of %d (+%d): strict %v, want %v", c.n, c.size, c.extra, got, c.want)
		}
	}
}

// FuzzStrictSchema34r walks arbitrary JSON: the walk never panics nor
// runs away, and a schema it calls strict has an object root.
func FuzzStrictSchema34r(f *testing.F) {
	for _, s := range []string{
		strictNested(3), strictWide(3), strict34rEnum(3, 4, 1),
		strict34rObject(`{"$ref":"#/$defs/a~1b~0c"}`), strict34rObject(`{"anyOf":[{"type":"string"},{"$ref":"#"}]}`),
		strict34rObject(`{"type":["string","null"],"format":"date"}`), `{"type":"object"}`, `[]`, `{`,
		strict34rObject(`{"type":"string","pattern":"^[^]\\(?=](a)\\1(?<!b)\\"}`), strict34rObject(`{"type":["integer","null"],"enum":[1,2.0,null],"const":3}`),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, schema []byte) {
		if !json.Valid(schema) {
			return // parseFormat passes a compact JSON object only
		}
		if strictSchema(json.RawMessage(schema)) {
			var root map[string]any
			if err := json.Unmarshal(schema, &root); err != nil || root["type"] != "object" {
				t.Fatalf("strict for %s", schema)
			}
		}
	})
}
