package openaiapi

import (
	"bytes"
	"encoding/json"
	"errors"
)

// ErrNotJSONObject is returned by RewriteModel and RunInput for a body that
// is not a valid JSON document whose top level is an object.
var ErrNotJSONObject = errors.New("openaiapi: body is not a JSON object")

// RewriteModel returns body with the value of every top-level "model" member
// replaced by the JSON encoding of target. Nothing else changes: key order,
// whitespace, escapes, number spellings and nested "model" keys (e.g. inside
// tool schemas) are byte-identical, which is the tunnel's passthrough
// promise. Re-marshalling would reorder keys and reformat numbers, so the
// value's byte span is located by scanning and spliced instead.
//
// Every duplicate top-level "model" is rewritten so that no JSON parser
// upstream (first-wins or last-wins) can see the external name. A body
// without a top-level "model" gets one inserted before its first member.
func RewriteModel(body []byte, target string) ([]byte, error) {
	open, members, err := scanTopLevel(body)
	if err != nil {
		return nil, err
	}
	value := encodeString(target)
	var models []member
	for _, m := range members {
		if m.isModel {
			models = append(models, m)
		}
	}
	if len(models) == 0 {
		return insertModel(body, open, members, value), nil
	}
	grow := len(body)
	for _, m := range models {
		grow += len(value) - (m.valEnd - m.valStart)
	}
	out := make([]byte, 0, grow)
	prev := 0
	for _, m := range models {
		out = append(out, body[prev:m.valStart]...)
		out = append(out, value...)
		prev = m.valEnd
	}
	return append(out, body[prev:]...), nil
}

func insertModel(body []byte, open int, members []member, value []byte) []byte {
	ins := append([]byte(`"model":`), value...)
	at := open + 1
	if len(members) > 0 {
		// Before the first key (after any whitespace following '{'), so that
		// RunInput of the result gives back the original bytes.
		at = members[0].keyStart
		ins = append(ins, ',')
	}
	out := make([]byte, 0, len(body)+len(ins))
	out = append(out, body[:at]...)
	out = append(out, ins...)
	return append(out, body[at:]...)
}

// RunInput returns body without its top-level "model" member(s), for
// RunRequest.input (the wire never carries the external model). Like
// RewriteModel it splices: the member and exactly one adjacent comma are cut,
// every other byte is kept.
func RunInput(body []byte) ([]byte, error) {
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

// member locates one top-level object member in the body.
type member struct {
	keyStart int // index of the key's opening quote
	valStart int // first byte of the value
	valEnd   int // one past the value's last byte
	isModel  bool
}

// scanTopLevel validates body and returns the index of the top-level '{' and
// the byte spans of the object's members. Because the document is validated
// first, the scanner below only has to find boundaries, not diagnose errors.
func scanTopLevel(body []byte) (open int, members []member, err error) {
	if !json.Valid(body) {
		return 0, nil, ErrNotJSONObject
	}
	i := skipWS(body, 0)
	if i >= len(body) || body[i] != '{' {
		return 0, nil, ErrNotJSONObject
	}
	open = i
	i = skipWS(body, i+1)
	if body[i] == '}' {
		return open, nil, nil
	}
	for {
		keyStart := i
		keyEnd := skipString(body, i)
		i = skipWS(body, keyEnd) // at ':'
		valStart := skipWS(body, i+1)
		valEnd := skipValue(body, valStart)
		members = append(members, member{
			keyStart: keyStart,
			valStart: valStart,
			valEnd:   valEnd,
			isModel:  keyIsModel(body[keyStart:keyEnd]),
		})
		i = skipWS(body, valEnd)
		if body[i] == '}' {
			return open, members, nil
		}
		i = skipWS(body, i+1) // past ','
	}
}

// keyIsModel reports whether a raw JSON string literal decodes to "model";
// an escaped spelling such as "\u006dodel" is the same key to every parser.
func keyIsModel(raw []byte) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == `"model"`
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && s == "model"
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string literal starting at i.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++ // the escaped byte cannot end the string
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// skipValue returns the index just past the value starting at i.
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); {
			switch b[j] {
			case '"':
				j = skipString(b, j)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
			j++
		}
		return len(b)
	default: // number, true, false, null
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return j
			}
			j++
		}
		return j
	}
}

// encodeString JSON-encodes s without HTML escaping. Invalid UTF-8 in s
// becomes U+FFFD, as with encoding/json.
func encodeString(s string) []byte {
	return mustMarshal(s)
}
