package anthropicapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// An array's items and an anyOf's branches are a level of nesting each,
// as a property is: ten levels, the leaf included, are strict; eleven
// are not. (Counted at the same level, a schema of arrays in arrays had
// no depth bound but the walk's node count.)
func TestStrictSchemaDepthThroughItemsAndAnyOf37m(t *testing.T) {
	inProp := func(sub string) string {
		return `{"type":"object","additionalProperties":false,"properties":{"a":` + sub + `},"required":["a"]}`
	}
	arrays := func(k int) string {
		return strings.Repeat(`{"type":"array","items":`, k) + `{"type":"string"}` + strings.Repeat(`}`, k)
	}
	anyOfs := func(k int) string {
		return strings.Repeat(`{"anyOf":[{"type":"null"},`, k) + `{"type":"string"}` + strings.Repeat(`]}`, k)
	}
	for _, c := range []struct {
		name   string
		schema string
		want   bool
	}{
		// The root is level 1 and its property level 2: k more levels
		// put the leaf at level 2+k.
		{"items, leaf at 10", inProp(arrays(8)), true},
		{"items, leaf at 11", inProp(arrays(9)), false},
		{"anyOf, leaf at 10", inProp(anyOfs(8)), true},
		{"anyOf, leaf at 11", inProp(anyOfs(9)), false},
	} {
		if got := strictSchema(json.RawMessage(c.schema)); got != c.want {
			t.Errorf("%s: strict %v, want %v", c.name, got, c.want)
		}
	}
}

// OpenAI's bound is 5,000 object properties: a schema with exactly that
// many (each a schema of its own, below the root) is strict. The walk
// counted the root among its 5,000 schemas, so 5,000 properties were
// one too many.
func TestStrictSchemaTakesFiveThousandProperties37m(t *testing.T) {
	plain := func(n int) string {
		return strings.ReplaceAll(strictWide(n), `{"type":"string","enum":["v"]}`, `{"type":"string"}`)
	}
	if !strictSchema(json.RawMessage(plain(5000))) {
		t.Error("5,000 properties: not strict")
	}
	if strictSchema(json.RawMessage(plain(5001))) {
		t.Error("5,001 properties: strict")
	}
}

// OpenAI's 120,000 characters of names and values are a bound reached,
// not passed: names of exactly that many are strict. And what is inside a
// character class is characters, not syntax, up to the class's end:
// "(?=" after another character of the class is no lookahead.
func TestStrictSchemaAtTheCharsBoundAndClassContent37m(t *testing.T) {
	name := strings.Repeat("n", 120000)
	atBound := `{"type":"object","additionalProperties":false,"properties":{"` + name + `":{"type":"string"}},"required":["` + name + `"]}`
	if !strictSchema(json.RawMessage(atBound)) {
		t.Error("names of 120,000 characters: not strict")
	}
	for _, c := range []struct {
		re   string
		want bool
	}{
		{`^[a(?=]+$`, true},
		{`^[a](?=b)$`, false},
	} {
		if got := strictPattern(c.re); got != c.want {
			t.Errorf("strictPattern(%q) = %v, want %v", c.re, got, c.want)
		}
	}
}
