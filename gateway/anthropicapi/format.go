package anthropicapi

import "encoding/json"

// outputFormat is a request's JSON output format (output_config.format, or
// the deprecated top-level output_format): the answer's text must be JSON
// matching schema. The chat body carries it as OpenAI's response_format
// (responseFormat), which the run path reads as the run's ResponseFormat.
type outputFormat struct {
	name   string          // the response_format's json_schema name (formatName)
	schema json.RawMessage // a compact JSON object
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
	return &outputFormat{name: formatName(rawSchema), schema: schema}, nil
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
	// Strict is always true: Anthropic's output format constrains the
	// answer (its decoder follows the schema), which is what strict asks
	// of an OpenAI-style server.
	Strict bool `json:"strict"`
}

// responseFormat renders the request's output format as the chat body's
// response_format; nil when it has none.
func (r *Request) responseFormat() *oaResponseFormat {
	if r.format == nil {
		return nil
	}
	return &oaResponseFormat{Type: formatTypeJSONSchema,
		JSONSchema: oaJSONSchema{Name: r.format.name, Schema: r.format.schema, Strict: true}}
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
