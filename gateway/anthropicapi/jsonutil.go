package anthropicapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
)

// --- JSON helpers. A field that is null counts as absent. ---

var errTrailing = errors.New("trailing data")

// decodeBody decodes the body as exactly one JSON object.
func decodeBody(body []byte) (map[string]json.RawMessage, *Error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var obj map[string]json.RawMessage
	err := dec.Decode(&obj)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errTrailing
		}
	}
	if err != nil || obj == nil {
		return nil, invalid("The request body is not a valid JSON object.")
	}
	return obj, nil
}

func field(obj map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	raw, ok := obj[name]
	if !ok || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

func isString(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '"' }

func str(raw json.RawMessage, path string) (string, *Error) {
	var s string
	if !isString(raw) || json.Unmarshal(raw, &s) != nil {
		return "", invalid("%s: expected a string", path)
	}
	return s, nil
}

func requiredString(obj map[string]json.RawMessage, name, path string) (string, *Error) {
	raw, ok := field(obj, name)
	if !ok {
		return "", invalid("%s.%s: Field required", path, name)
	}
	return str(raw, path+"."+name)
}

func boolean(raw json.RawMessage, path string) (bool, *Error) {
	switch string(raw) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, invalid("%s: expected a boolean", path)
}

func integer(raw json.RawMessage, path string) (int, *Error) {
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n > 1<<40 || n < -(1<<40) {
		return 0, invalid("%s: expected an integer", path)
	}
	return int(n), nil
}

func number(raw json.RawMessage, path string) (float64, *Error) {
	var f float64
	if len(raw) == 0 || raw[0] == '"' || json.Unmarshal(raw, &f) != nil {
		return 0, invalid("%s: expected a number", path)
	}
	return f, nil
}

func array(raw json.RawMessage, path string) ([]json.RawMessage, *Error) {
	var a []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &a) != nil {
		return nil, invalid("%s: expected an array", path)
	}
	return a, nil
}

func object(raw json.RawMessage, path string) (map[string]json.RawMessage, *Error) {
	var m map[string]json.RawMessage
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, invalid("%s: expected an object", path)
	}
	return m, nil
}

// compactObject checks raw is a JSON object and returns it without
// insignificant whitespace.
func compactObject(raw json.RawMessage, path string) (json.RawMessage, *Error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, invalid("%s: expected an object", path)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, invalid("%s: expected an object", path)
	}
	return buf.Bytes(), nil
}
