package openaiapi

import (
	"bytes"
	"encoding/json"
)

// Request validation cuts members out of a body that json.Valid (or a
// json.Unmarshal) already accepted, so re-running encoding/json on each
// member — a second validation pass plus a copy of every value — is wasted
// work on every request. scanObject and appendElements split an already
// validated value by byte scanning instead; their results alias raw (capped
// so that an append never writes into it). Anything that is not the
// expected shape (they may also be handed unvalidated bytes) makes them
// report !ok, and the callers then fall back to encoding/json, so the
// outcome is always what json.Unmarshal would give.

// scanMembers calls fn with each member of the JSON object raw, in order
// (the key decoded, the value's bytes), and reports whether raw is a
// well-formed object as far as the scan can tell; fn may have been called
// for a prefix of a malformed one.
func scanMembers(raw []byte, fn func(k string, v json.RawMessage)) bool {
	t := bytes.TrimSpace(raw)
	if len(t) < 2 || t[0] != '{' || t[len(t)-1] != '}' {
		return false
	}
	i := skipWS(t, 1)
	if i < len(t) && t[i] == '}' {
		return i == len(t)-1
	}
	for i < len(t) {
		if t[i] != '"' {
			return false
		}
		ke := skipString(t, i)
		if ke > len(t) || t[ke-1] != '"' || ke-i < 2 {
			return false
		}
		// asString, not json.Unmarshal into a local: a string whose
		// address is taken escapes to the heap, one allocation per key.
		k, ok := asString(t[i:ke])
		if !ok {
			return false
		}
		i = skipWS(t, ke)
		if i >= len(t) || t[i] != ':' {
			return false
		}
		vs := skipWS(t, i+1)
		if vs >= len(t)-1 { // the value cannot be the closing brace
			return false
		}
		ve := skipValue(t, vs)
		if ve <= vs || ve > len(t)-1 {
			return false
		}
		fn(k, json.RawMessage(t[vs:ve:ve]))
		i = skipWS(t, ve)
		switch {
		case i == len(t)-1 && t[i] == '}':
			return true
		case i < len(t) && t[i] == ',':
			i = skipWS(t, i+1)
		default:
			return false
		}
	}
	return false
}

// scanObject returns the members of the JSON object raw, a later duplicate
// key winning, as json.Unmarshal into an object does, and the member s
// flags (members.go; "" when none, and always when s is nil): the first key
// in the body's order that is a case variant of one of s's names, checked
// as each key is decoded rather than by a second walk over the map, or,
// failing one, the first of s's names that comes twice, looked for only
// when the map ends up smaller than the keys counted. ok is false when raw
// is not a well-formed object as far as the scan can tell.
func scanObject(raw []byte, s *memberSet) (o object, flagged string, ok bool) {
	o = make(object, 8)
	keys := 0
	ok = scanMembers(raw, func(k string, v json.RawMessage) {
		if flagged == "" && s.isVariant(k) {
			flagged = k
		}
		keys++
		o[k] = v
	})
	if !ok {
		return nil, "", false
	}
	if flagged == "" && s != nil && len(o) < keys {
		flagged = s.firstRepeat(bytes.TrimSpace(raw))
	}
	return o, flagged, true
}

// scanFields is scanObject for an object read only through s's names: it
// stores the raw value of each in dst (by s's order; nil when absent, the
// last copy when repeated) and builds no map, which on a long
// conversation is most of what validating a message costs. flagged is as
// scanObject's, a repeat noticed as it is stored. dst has len(s.names)
// elements; unknown members are skipped.
func scanFields(raw []byte, s *memberSet, dst []json.RawMessage) (flagged string, ok bool) {
	clear(dst)
	repeat := ""
	ok = scanMembers(raw, func(k string, v json.RawMessage) {
		if n := s.index(k); n >= 0 {
			if dst[n] != nil && repeat == "" {
				repeat = k
			}
			dst[n] = v
		} else if flagged == "" && s.isVariant(k) {
			flagged = k
		}
	})
	if !ok {
		return "", false
	}
	if flagged == "" {
		flagged = repeat
	}
	return flagged, true
}

// maxMembers bounds a memberSet's names, so that fields holds the values
// of any set's names on the stack.
const maxMembers = 24

// fields are an object's members as read through one memberSet's names:
// each name's raw value (nil when absent, the last copy when repeated),
// without a map. Validation reads the objects it looks into this way, or
// (messages and their content parts, many per request) into arrays
// indexed by their sets' positions directly; only the run path, which
// carries the members no name covers (extraMembers), builds maps.
type fields struct {
	set *memberSet
	v   [maxMembers]json.RawMessage
}

// read fills f with the members of the object raw by s's names; flagged
// and ok are fieldsOf's.
func (f *fields) read(raw json.RawMessage, s *memberSet) (flagged string, ok bool) {
	f.set = s
	return fieldsOf(raw, s, f.v[:len(s.names)])
}

// get returns the value of name, which must be one of the names of the
// set f was read by: any other is a bug of this package, not of a request
// (TestMemberSetsCoverReads checks every name the package reads).
func (f *fields) get(name string) json.RawMessage {
	i := f.set.index(name)
	if i < 0 {
		panic("openaiapi: " + name + " is not a member the object is read by")
	}
	return f.v[i]
}

// appendElements appends the elements of the JSON array raw to dst, as
// json.Unmarshal into []json.RawMessage decodes them; ok as for
// scanObject. A caller's buffer on its stack holds a short array (a
// conversation's messages, a message's parts) without a heap allocation
// per doubling of the element count.
func appendElements(dst []json.RawMessage, raw []byte) (elems []json.RawMessage, ok bool) {
	t := bytes.TrimSpace(raw)
	if len(t) < 2 || t[0] != '[' || t[len(t)-1] != ']' {
		return nil, false
	}
	elems = dst
	i := skipWS(t, 1)
	if i < len(t) && t[i] == ']' {
		return elems, i == len(t)-1
	}
	for i < len(t)-1 {
		ve := skipValue(t, i)
		if ve <= i || ve > len(t)-1 {
			return nil, false
		}
		elems = append(elems, json.RawMessage(t[i:ve:ve]))
		i = skipWS(t, ve)
		switch {
		case i == len(t)-1 && t[i] == ']':
			return elems, true
		case i < len(t) && t[i] == ',':
			i = skipWS(t, i+1)
		default:
			return nil, false
		}
	}
	return nil, false
}

// intern returns b as a string, without allocating for the member names
// and enum values requests commonly carry: every key of every object of
// every request, and every role, would otherwise cost an allocation.
func intern(b []byte) string {
	if i := internTable.findBytes(b); i >= 0 {
		return internedNames[i]
	}
	return string(b)
}

var (
	internedNames = [...]string{
		"model", "messages", "role", "content", "name", "stream", "stream_options",
		"include_usage", "max_tokens", "max_completion_tokens", "temperature",
		"top_p", "n", "stop", "seed", "user", "tools", "tool_choice", "tool_calls",
		"tool_call_id", "parallel_tool_calls", "type", "function", "parameters",
		"description", "arguments", "id", "text", "image_url", "url",
		"response_format", "presence_penalty", "frequency_penalty", "logprobs",
		"top_logprobs", "prompt", "input", "encoding_format", "system",
		"assistant", "tool", "developer", "auto", "none", "required",
	}
	internTable = newNameTable(internedNames[:])
)
