package anthropicapi

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// outputFormat is a request's JSON output format (output_config.format, or
// the deprecated top-level output_format): the answer's text must be JSON
// matching schema. The chat body carries it as OpenAI's response_format
// (responseFormat), which the run path reads as the run's ResponseFormat.
type outputFormat struct {
	name   string          // the response_format's json_schema name (formatName)
	schema json.RawMessage // a compact JSON object
	strict bool            // schema meets OpenAI's strict mode (strictSchema)
}

// formatTypeJSONSchema is the one output format type Anthropic's API
// takes (the SDKs' constant.JSONSchema).
const formatTypeJSONSchema = "json_schema"

// parseFormat parses an output format at path, as Anthropic's API checks
// it: an object whose type (required) is "json_schema" and whose schema
// (required) is a JSON object. What the schema may say is left to the
// backend: constrained decoding (vLLM, llama.cpp, Ollama) takes general
// JSON Schema, and the subset Anthropic's own decoder takes
// (additionalProperties false on every object, no numeric bounds) is
// narrower than what those accept, so refusing beyond it would only refuse
// schemas that work here. A null format is no format (nil, nil).
func parseFormat(raw json.RawMessage, path string) (*outputFormat, *Error) {
	obj, e := object(raw, path)
	if e != nil {
		return nil, e
	}
	typ, e := requiredString(obj, "type", path)
	if e != nil {
		return nil, e
	}
	if typ != formatTypeJSONSchema {
		return nil, invalid("%s.type: must be %q", path, formatTypeJSONSchema)
	}
	rawSchema, ok := field(obj, "schema")
	if !ok {
		return nil, invalid("%s.schema: Field required", path)
	}
	schema, e := compactObject(rawSchema, path+".schema")
	if e != nil {
		return nil, e
	}
	return &outputFormat{name: formatName(rawSchema), schema: schema, strict: strictSchema(schema)}, nil
}

// defaultFormatName names a response_format whose schema has no usable
// title: OpenAI requires a name, Anthropic's format has none.
const defaultFormatName = "response"

// maxFormatNameLen is OpenAI's bound on a json_schema name
// (^[a-zA-Z0-9_-]{1,64}$).
const maxFormatNameLen = 64

// formatName is the name the response_format carries for schema: its
// title when that is a valid OpenAI name (Pydantic and most schema
// generators title the root after the type, "ContactInfo", which tells a
// model that reads the name what it is writing), else defaultFormatName.
// Backends with constrained decoding ignore the name.
// The title is the member named exactly "title" (a map, not a struct
// field, which encoding/json would match to "Title" too).
func formatName(schema json.RawMessage) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(schema, &obj) != nil {
		return defaultFormatName
	}
	raw, ok := field(obj, "title")
	if !ok {
		return defaultFormatName
	}
	title, e := str(raw, "title")
	if e != nil || len(title) > maxFormatNameLen || !validToolName(title) {
		return defaultFormatName
	}
	return title
}

// oaResponseFormat is OpenAI's response_format of type json_schema.
type oaResponseFormat struct {
	Type       string       `json:"type"`
	JSONSchema oaJSONSchema `json:"json_schema"`
}

type oaJSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	// Strict is true when the schema meets OpenAI's strict mode
	// (strictSchema): Anthropic's output format constrains the answer
	// (its decoder follows the schema), which is what strict asks of an
	// OpenAI-style server. A schema strict mode refuses goes without it
	// (OpenAI's default, false: the model is asked for the schema, not
	// held to it) rather than be refused by OpenAI itself; vLLM,
	// llama-server and Ollama constrain their decoding to the schema
	// whatever strict says (vLLM reads strict and never uses it;
	// llama-server and Ollama do not read it).
	Strict bool `json:"strict,omitempty"`
}

// responseFormat renders the request's output format as the chat body's
// response_format; nil when it has none.
func (r *Request) responseFormat() *oaResponseFormat {
	if r.format == nil {
		return nil
	}
	return &oaResponseFormat{Type: formatTypeJSONSchema,
		JSONSchema: oaJSONSchema{Name: r.format.name, Schema: r.format.schema, Strict: r.format.strict}}
}

// outputFormats reads the request's output format: output_config.format
// (format, already parsed with the rest of output_config) or the
// deprecated top-level output_format of Anthropic's structured-outputs
// beta, which clients written for the beta still send (the SDKs' beta
// params keep it). Both are checked; when both are given,
// output_config.format, the current one, is the format.
func outputFormats(obj map[string]json.RawMessage, format *outputFormat) (*outputFormat, *Error) {
	raw, ok := field(obj, "output_format")
	if !ok {
		return format, nil
	}
	old, e := parseFormat(raw, "output_format")
	if e != nil {
		return nil, e
	}
	if format != nil {
		return format, nil
	}
	return old, nil
}

// HasFormat reports whether the request asks for a JSON output format
// (the chat body carries a response_format).
func (r *Request) HasFormat() bool { return r.format != nil }

// Bounds of strictSchema's walk of a client's schema. OpenAI's own: a
// strict schema has at most 10 levels of nesting, 5,000 object properties,
// 1,000 enum values, and 120,000 characters of property names, definition
// names, enum and const values; one enum of more than 250 string values
// has at most 15,000 characters of them. Past any of them strict is left
// out. maxStrictNodes is also the walk's own bound on the schemas that are
// not properties (items, anyOf branches, definitions), which OpenAI does
// not count: the walk visits each schema once, at most maxStrictNodes
// properties' and as many others besides the root.
const (
	maxStrictDepth     = 10
	maxStrictNodes     = 5000
	maxStrictEnums     = 1000
	maxStrictChars     = 120000
	maxStrictLongEnum  = 250
	maxStrictEnumChars = 15000
)

// strictTypes are the type names strict mode takes, alone or in a list
// (["string","null"] is how it makes a value optional).
var strictTypes = map[string]bool{
	"string": true, "number": true, "integer": true, "boolean": true,
	"object": true, "array": true, "null": true,
}

// strictFormats are the string formats strict mode takes: any other
// ("uri", say) is refused ("'uri' is not a valid format").
var strictFormats = map[string]bool{
	"date-time": true, "time": true, "date": true, "duration": true,
	"email": true, "hostname": true, "ipv4": true, "ipv6": true, "uuid": true,
}

// strictKeywords are the schema keywords OpenAI's strict mode takes: a
// schema using any other (allOf, oneOf, not, if, patternProperties,
// minLength, default, $schema, ...) is not sent as strict. A list of what
// is known to be taken, not of what is known to be refused, so that a
// keyword strict mode refuses cannot slip through as unknown.
var strictKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "anyOf": true, "enum": true, "const": true, "$ref": true,
	"$defs": true, "definitions": true, "title": true, "description": true,
	"pattern": true, "format": true, "minimum": true, "maximum": true,
	"exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
	"minItems": true, "maxItems": true,
}

// strictSchema reports whether schema (a compact JSON object) meets the
// rules OpenAI's strict mode refuses a schema without: the root is an
// object (not anyOf); every object lists each of its properties in
// required, and nothing else, and sets additionalProperties false; every
// keyword is one strict mode takes (strictKeywords); every schema has a
// type strict mode knows (strictTypes), or is an anyOf or a $ref ("schema
// must have a 'type' key"); a format is one strict mode knows
// (strictFormats); a pattern has no lookaround or backreference
// (strictPattern); each enum or const value is of the schema's type
// (valueTyped); a $ref stands alone (no sibling keyword) and names a
// schema within this one; and OpenAI's size bounds hold (maxStrictDepth
// and the rest). Anthropic's
// structured outputs take optional properties, which is what strict mode
// refuses most often.
func strictSchema(schema json.RawMessage) bool {
	var root map[string]any
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	if dec.Decode(&root) != nil || root["type"] != "object" || root["anyOf"] != nil {
		return false
	}
	w := strictWalk{root: root}
	return w.schema(root, 1)
}

// strictWalk is strictSchema's walk: the schema's root ($ref), and what
// it has counted so far: nodes are the schemas that are not properties
// (sub), props the properties (object).
type strictWalk struct {
	root                       map[string]any
	nodes, props, enums, chars int
}

// sub checks v, a schema that is not a property (an array's items, an
// anyOf branch, a definition), counted against the walk's own bound:
// OpenAI's 5,000 bounds properties, which object counts before they are
// walked, and one property may hold several such schemas.
func (w *strictWalk) sub(v any, depth int) bool {
	w.nodes++
	return w.nodes <= maxStrictNodes && w.schema(v, depth)
}

// schema checks one (sub)schema v at nesting depth.
func (w *strictWalk) schema(v any, depth int) bool {
	s, ok := v.(map[string]any)
	if !ok || depth > maxStrictDepth {
		return false
	}
	for k := range s {
		if !strictKeywords[k] {
			return false
		}
	}
	if ref, ok := s["$ref"]; ok {
		r, ok := ref.(string)
		return ok && len(s) == 1 && w.resolves(r)
	}
	if !strictType(s) {
		return false
	}
	if f, ok := s["format"]; ok {
		if name, ok := f.(string); !ok || !strictFormats[name] {
			return false
		}
	}
	if p, ok := s["pattern"]; ok {
		if re, ok := p.(string); !ok || !strictPattern(re) {
			return false
		}
	}
	if !w.values(s) || !w.object(s, depth) {
		return false
	}
	for _, defs := range []any{s["$defs"], s["definitions"]} {
		if !w.named(defs, depth, w.sub) {
			return false
		}
	}
	if items, ok := s["items"]; ok && !w.sub(items, depth+1) {
		return false
	}
	if anyOf, ok := s["anyOf"]; ok {
		list, ok := anyOf.([]any)
		if !ok || len(list) == 0 {
			return false
		}
		for _, sub := range list {
			if !w.sub(sub, depth+1) {
				return false
			}
		}
	}
	return true
}

// object checks what strict mode asks of an object schema s (one whose
// type is or includes "object", or that has properties): additional
// properties false, and required naming exactly its properties.
func (w *strictWalk) object(s map[string]any, depth int) bool {
	_, hasProps := s["properties"]
	if !hasProps && !typeIncludes(s["type"], "object") {
		return s["additionalProperties"] == nil && s["required"] == nil
	}
	if s["additionalProperties"] != false {
		return false
	}
	props := map[string]any{}
	if hasProps {
		var ok bool
		if props, ok = s["properties"].(map[string]any); !ok {
			return false
		}
	}
	required, ok := s["required"].([]any)
	if !ok && s["required"] != nil || len(required) != len(props) {
		return false
	}
	if w.props += len(props); w.props > maxStrictNodes {
		return false
	}
	// As many names as properties, each a property, none twice.
	seen := make(map[string]bool, len(required))
	for _, name := range required {
		n, ok := name.(string)
		if _, known := props[n]; !ok || !known || seen[n] {
			return false
		}
		seen[n] = true
	}
	return w.named(props, depth, w.schema)
}

// named checks a map of named subschemas (properties, $defs) with check
// (schema or sub), one level deeper than depth; nil is none.
func (w *strictWalk) named(v any, depth int, check func(any, int) bool) bool {
	if v == nil {
		return true
	}
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for name, sub := range m {
		if w.chars += len(name); w.chars > maxStrictChars || !check(sub, depth+1) {
			return false
		}
	}
	return true
}

// values checks schema s's enum and const: each value of a type s's type
// names (valueTyped), and counted toward OpenAI's bounds.
func (w *strictWalk) values(s map[string]any) bool {
	enum, konst := s["enum"], s["const"]
	if enum != nil {
		list, ok := enum.([]any)
		if !ok {
			return false
		}
		if w.enums += len(list); w.enums > maxStrictEnums {
			return false
		}
		own := 0
		for _, e := range list {
			if !valueTyped(e, s["type"]) {
				return false
			}
			own += valueChars(e)
		}
		if w.chars += own; len(list) > maxStrictLongEnum && own > maxStrictEnumChars {
			return false
		}
	}
	if _, ok := s["const"]; ok {
		// A const of null is a const too (s["const"] is nil for it).
		if !valueTyped(konst, s["type"]) {
			return false
		}
		w.chars += valueChars(konst)
	}
	return w.chars <= maxStrictChars
}

// valueTyped reports whether v, an enum or const value, is of a type typ
// (a schema's type: a name or a list) names: a string of "string", a
// number of "number" (an integral one of "integer" too, 1.0 as JSON Schema
// counts it), a boolean of "boolean", null of "null". A value of no type
// named is one no answer can take: the schema's type and its enum
// disagree, and a constrained decoder has nothing to write; an object or
// array value, or a schema without a type (an anyOf beside an enum), is
// not taken as strict either.
func valueTyped(v, typ any) bool {
	switch x := v.(type) {
	case string:
		return typeIncludes(typ, "string")
	case bool:
		return typeIncludes(typ, "boolean")
	case nil:
		return typeIncludes(typ, "null")
	case json.Number:
		if typeIncludes(typ, "number") {
			return true
		}
		f, err := strconv.ParseFloat(x.String(), 64)
		return err == nil && !math.IsInf(f, 0) && f == math.Trunc(f) && typeIncludes(typ, "integer")
	}
	return false
}

// strictPattern reports whether re, a schema's pattern, is a regular
// expression strict mode takes. OpenAI documents pattern as supported
// without naming a dialect, and refuses a lookaround ((?=, (?!, (?<=,
// (?<!: "Invalid JSON schema: regex lookaround is not supported"); a
// backreference (\1 to \9, \k<name>, (?P=name)) is refused too: no
// regular grammar, which constrained decoding compiles a pattern to, can
// hold a value to one. What is escaped (\( is a parenthesis) or in a
// character class ([(?=] is three characters) is neither. A digit or k
// escaped is refused wherever it is, in a class too: Rust's regex parser
// (regex-syntax, which Rust constrained decoders parse patterns with)
// refuses every \0 to \9 as an "unsupported backreference", [\1] and \0
// included, and knows no \k. A class that opens with ']' ([]…, [^]…) is refused: Python
// and Rust read that ']' as a character of the class, ECMA-262 (JSON
// Schema's own dialect) as the end of an empty class ([^] is any
// character), so what follows is in a class or not depending on the
// reader. One pass over re: its length is bounded by the request's.
func strictPattern(re string) bool {
	class := false
	for i := 0; i < len(re); i++ {
		c := re[i]
		switch {
		case c == '\\':
			if i+1 < len(re) {
				if n := re[i+1]; n >= '0' && n <= '9' || n == 'k' {
					return false
				}
			}
			i++ // the escaped character is a literal
		case class:
			class = c != ']'
		case c == '[':
			class = true
			if i+1 < len(re) && re[i+1] == '^' {
				i++
			}
			if i+1 < len(re) && re[i+1] == ']' {
				return false
			}
		case c == '(':
			rest := re[i:]
			for _, look := range [...]string{"(?=", "(?!", "(?<=", "(?<!", "(?P="} {
				if strings.HasPrefix(rest, look) {
					return false
				}
			}
		}
	}
	return true
}

// valueChars is the length an enum or const value counts: a string's own,
// or any other value's as one character per member (numbers and booleans
// are short; strict mode takes no objects here).
func valueChars(v any) int {
	if s, ok := v.(string); ok {
		return len(s)
	}
	return 1
}

// strictType reports whether schema s has a type strict mode takes: a
// name in strictTypes, or a list of distinct ones; or none, for an anyOf
// (its branches have theirs).
func strictType(s map[string]any) bool {
	switch t := s["type"].(type) {
	case nil:
		_, ok := s["anyOf"]
		return ok
	case string:
		return strictTypes[t]
	case []any:
		seen := make(map[string]bool, len(t))
		for _, x := range t {
			name, ok := x.(string)
			if !ok || !strictTypes[name] || seen[name] {
				return false
			}
			seen[name] = true
		}
		return len(t) > 0
	}
	return false
}

// pointerToken unescapes a JSON pointer's token (RFC 6901).
var pointerToken = strings.NewReplacer("~1", "/", "~0", "~")

// resolves reports whether ref, a $ref, names a schema within the root:
// "#" itself, or a JSON pointer ("#/$defs/item") through its objects.
func (w *strictWalk) resolves(ref string) bool {
	if ref == "#" {
		return true
	}
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return false
	}
	var at any = w.root
	for _, tok := range strings.Split(rest, "/") {
		m, ok := at.(map[string]any)
		if !ok {
			return false
		}
		if at, ok = m[pointerToken.Replace(tok)]; !ok {
			return false
		}
	}
	_, ok = at.(map[string]any)
	return ok
}

// typeIncludes reports whether a schema's type (a name or a list of
// names) includes name.
func typeIncludes(typ any, name string) bool {
	switch t := typ.(type) {
	case string:
		return t == name
	case []any:
		for _, x := range t {
			if x == name {
				return true
			}
		}
	}
	return false
}
