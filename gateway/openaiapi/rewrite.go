package openaiapi

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"strings"

	"github.com/iop-gateway/iop/internal/jsonenc"
)

// ErrNotJSONObject is returned by RewriteModel for a body that
// is not a valid JSON document whose top level is an object.
var ErrNotJSONObject = errors.New("openaiapi: body is not a JSON object")

// RewriteModel returns body with the value of every top-level "model" member
// replaced by the JSON encoding of target. Nothing else changes: key order,
// whitespace, escapes, number spellings and nested "model" keys (e.g. inside
// tool schemas) are byte-identical, which is the tunnel's passthrough
// promise. Re-marshalling would reorder keys and reformat numbers, so the
// value's byte span is located by scanning and spliced instead.
//
// Every duplicate top-level "model", and every key a case-insensitive parser
// would take for it ("MODEL", "Model", escaped spellings), is rewritten so
// that no JSON parser upstream (first-wins, last-wins or case-folding) can
// see the external name. A body without an exact top-level "model" gets one
// inserted before its first member. Parse* refuses case variants and
// duplicates outright (see modelKeyError); this is the second line.
func RewriteModel(body []byte, target string) ([]byte, error) {
	if !valid(body) {
		return nil, ErrNotJSONObject
	}
	return RewriteValidModel(body, target)
}

// RewriteValidModel is RewriteModel for a body already known to be valid
// JSON: one that a Parse* function accepted, or that the edge encoded
// itself. It skips validating the body a second time, which on a small
// request costs as much as the rewrite. Any other body is a caller's bug.
func RewriteValidModel(body []byte, target string) ([]byte, error) {
	var buf [16]member // a request has a dozen members or fewer
	open, members, err := scanValidTopLevel(body, buf[:0])
	if err != nil {
		return nil, err
	}
	// The value is copied into the result, never kept: encoded into a
	// stack buffer, a model name under 64 bytes costs no allocation.
	var vbuf [64]byte
	value := jsonenc.AppendString(vbuf[:0], target)
	var mbuf [2]member
	models := mbuf[:0]
	exact := false
	for _, m := range members {
		if m.isModel {
			models = append(models, m)
			exact = exact || m.isExact
		}
	}
	if !exact {
		if len(models) > 0 {
			// Parse* refuses such bodies; a caller that skipped it still
			// never forwards a case variant's value.
			body = replaceValues(body, models, value)
			if _, members, err = scanValidTopLevel(body, members[:0]); err != nil {
				return nil, err
			}
		}
		return insertModel(body, open, members, value), nil
	}
	return replaceValues(body, models, value), nil
}

// replaceValues returns body with the value of each member in models
// (in body order) replaced by value.
func replaceValues(body []byte, models []member, value []byte) []byte {
	if len(models) == 0 {
		return body
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
	return append(out, body[prev:]...)
}

func insertModel(body []byte, open int, members []member, value []byte) []byte {
	ins := append([]byte(`"model":`), value...)
	at := open + 1
	if len(members) > 0 {
		// Before the first key (after any whitespace following '{'), so that
		// withoutModel (rewrite_test.go) of the result gives back the original bytes.
		at = members[0].keyStart
		ins = append(ins, ',')
	}
	out := make([]byte, 0, len(body)+len(ins))
	out = append(out, body[:at]...)
	out = append(out, ins...)
	return append(out, body[at:]...)
}

// member locates one top-level object member in the body.
type member struct {
	keyStart int  // index of the key's opening quote
	keyEnd   int  // one past the key's closing quote
	valStart int  // first byte of the value
	valEnd   int  // one past the value's last byte
	isModel  bool // the key folds to "model" (see keyFoldsToModel)
	isExact  bool // the key decodes to exactly "model"
}

// scanValidTopLevel returns the index of the top-level '{' of body, which
// must be valid JSON (e.g. one json.Unmarshal accepted), and the byte spans
// of the object's members. Because the document is valid, the scanner only
// has to find boundaries, not diagnose errors. The members are appended to dst
// (callers pass a stack array's slice, so that the scan allocates nothing).
func scanValidTopLevel(body []byte, dst []member) (open int, members []member, err error) {
	i := skipWS(body, 0)
	if i >= len(body) || body[i] != '{' {
		return 0, nil, ErrNotJSONObject
	}
	open = i
	i = skipWS(body, i+1)
	if body[i] == '}' {
		return open, nil, nil
	}
	members = dst
	for {
		keyStart := i
		keyEnd := skipString(body, i)
		i = skipWS(body, keyEnd) // at ':'
		valStart := skipWS(body, i+1)
		valEnd := skipValue(body, valStart)
		members = append(members, member{
			keyStart: keyStart,
			keyEnd:   keyEnd,
			valStart: valStart,
			valEnd:   valEnd,
			isModel:  keyFoldsToModel(body[keyStart:keyEnd]),
			isExact:  keyIsModel(body[keyStart:keyEnd]),
		})
		i = skipWS(body, valEnd)
		if body[i] == '}' {
			return open, members, nil
		}
		i = skipWS(body, i+1) // past ','
	}
}

// keyIsModel reports whether a raw JSON string literal decodes to exactly
// "model".
func keyIsModel(raw []byte) bool {
	if bytes.IndexByte(raw, '\\') < 0 { // no escapes: compare in place
		return len(raw) >= 2 && string(raw[1:len(raw)-1]) == "model"
	}
	k, ok := decodeKey(raw)
	return ok && k == "model"
}

// keyFoldsToModel reports whether a raw JSON string literal is a key that
// some upstream parser would take for "model": after decoding escapes
// ("\u006dodel" is the same key to every parser) it equals "model" under
// Unicode simple case folding, which is how Go's encoding/json (Ollama,
// LocalAI, many OpenAI-style servers) matches keys to struct fields.
func keyFoldsToModel(raw []byte) bool {
	if bytes.IndexByte(raw, '\\') < 0 { // no escapes: fold in place (same folding)
		return len(raw) >= 2 && bytes.EqualFold(raw[1:len(raw)-1], modelKey)
	}
	k, ok := decodeKey(raw)
	return ok && strings.EqualFold(k, "model")
}

var modelKey = []byte("model")

// decodeKey decodes a raw JSON string literal cut from a valid document.
func decodeKey(raw []byte) (string, bool) {
	if bytes.IndexByte(raw, '\\') < 0 && len(raw) >= 2 {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// modelKeyError reports a top-level key that folds to "model" but is not
// exactly "model", or a second exact "model". Either would let a client
// smuggle a model name past RewriteModel: the edge routes by one spelling
// while a case-insensitive or last-wins parser upstream reads another, and
// the model → target mapping is an access boundary. body must be valid JSON
// whose top level is an object.
func modelKeyError(body []byte) *Error {
	var buf [16]member
	_, members, err := scanValidTopLevel(body, buf[:0])
	if err != nil {
		return nil // not an object; the caller reports that
	}
	exact := 0
	for _, m := range members {
		if !m.isModel {
			continue
		}
		k, _ := decodeKey(body[m.keyStart:m.keyEnd])
		if k != "model" {
			return InvalidRequest(fmt.Sprintf(
				"The request has a key %s that differs from 'model' only in case or spelling; send the model only as 'model'.",
				quoteValue(k)), k)
		}
		if exact++; exact > 1 {
			return InvalidRequest("The request has more than one 'model' key; send the model exactly once.", "model")
		}
	}
	return nil
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

// skipString returns the index just past the string literal starting at i
// (len(b) when it does not end). Prompts are long strings, and every
// validation pass crosses them: it jumps from quote to quote with
// bytes.IndexByte (vectorised) rather than looking at each byte. A quote
// preceded by an odd run of backslashes is escaped (each backslash of the
// run escapes the next one; the last, if unpaired, the quote).
func skipString(b []byte, i int) int {
	// Most strings of a request are short (keys, roles, enum values,
	// names): two words looked at eight bytes at a time settle them
	// without a call to IndexByte, whose setup costs more than such a
	// string. The first quote or backslash is the lowest flagged byte.
	j := i + 1
	for w := 0; w < 2 && j+8 <= len(b); w++ {
		if m := quoteOrBackslash(binary.LittleEndian.Uint64(b[j:])); m != 0 {
			at := j + bits.TrailingZeros64(m)/8
			if b[at] == '"' {
				return at + 1
			}
			break // an escape: the loop below reads its run
		}
		j += 8
	}
	for j < len(b) {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			return len(b)
		}
		q += j
		run := 0
		for k := q - 1; k > i && b[k] == '\\'; k-- {
			run++
		}
		if run%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
	return len(b)
}

// quoteOrBackslash has the high bit set of each byte of x that is a quote
// or a backslash; above the lowest such byte it may flag others (a borrow
// runs on), so only the lowest is exact.
func quoteOrBackslash(x uint64) uint64 {
	q := x ^ ('"' * lsb)
	s := x ^ ('\\' * lsb)
	return ((q-lsb)&^q | (s-lsb)&^s) & msb
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
	return jsonenc.AppendString(make([]byte, 0, len(s)+2), s)
}
