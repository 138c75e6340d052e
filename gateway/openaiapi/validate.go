package openaiapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The helpers below validate fields of a decoded request object. They check
// only what the edge needs to route and render safely plus the types OpenAI
// documents, and they phrase errors the way OpenAI does ("Invalid type for
// 'x': expected …, but got … instead.") so SDK users recognise them.

type object = map[string]json.RawMessage

// decodeTopLevel checks that body is valid UTF-8 JSON whose top level is an
// object and returns that object's members (a later duplicate key wins, as
// with every mainstream JSON parser). A top-level key that an upstream parser
// could read as "model" other than the one exact "model" is refused (see
// modelKeyError), and so is a case variant of one of s's names or one of
// them given twice (members.go; s nil refuses neither).
func decodeTopLevel(body []byte, s *memberSet) (object, *Error) {
	// JSON's whitespace only: bytes.TrimSpace would also take a form feed,
	// a vertical tab or a no-break space, making a body valid here that
	// the tunnel forwards byte for byte and that no JSON parser accepts.
	trimmed := trimJSONSpace(body)
	if len(trimmed) == 0 {
		return nil, InvalidRequest("The request body is empty; expected a JSON object.", "")
	}
	// Checked before JSON so the caller learns the real problem: encoding/json
	// would silently replace invalid bytes with U+FFFD.
	if !utf8.Valid(body) {
		return nil, InvalidRequest("The request body is not valid UTF-8.", "")
	}
	obj, flagged, err := decodeObject(trimmed, s)
	if err != nil {
		// Unmarshal validates the whole document before decoding, so a type
		// error means valid JSON that is not an object.
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return nil, InvalidRequest(fmt.Sprintf("The request body must be a JSON object, but got %s.", kindOf(trimmed)), "")
		}
		return nil, InvalidRequest("We could not parse the JSON body of your request: it is not valid JSON.", "")
	}
	if obj == nil { // the literal null
		return nil, InvalidRequest("The request body must be a JSON object, but got null.", "")
	}
	// The map above keeps only the last of duplicate keys and distinguishes
	// "MODEL" from "model"; upstream parsers may do neither. Every top-level
	// set reads "model", so the scan has flagged any body modelKeyError
	// refuses: its own pass over the body (and its message about the
	// model) is needed only then, or without a set.
	if s == nil || flagged != "" {
		if e := modelKeyError(trimmed); e != nil {
			return nil, e
		}
	}
	if flagged != "" {
		return nil, s.refuse(flagged, pn(""))
	}
	return obj, nil
}

// readTop is decodeTopLevel for a body read only through s's names: their
// values go to f, and no map is built. A body the scan does not take (not
// an object, not valid) gets decodeTopLevel's answer.
func readTop(body []byte, s *memberSet, f *fields) *Error {
	trimmed := trimJSONSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '{' && utf8.Valid(body) && valid(trimmed) {
		f.set = s
		if flagged, ok := scanFields(trimmed, s, f.v[:len(s.names)]); ok {
			if flagged == "" {
				return nil
			}
			// As in decodeTopLevel: every top-level set reads "model".
			if e := modelKeyError(trimmed); e != nil {
				return e
			}
			return s.refuse(flagged, pn(""))
		}
	}
	obj, e := decodeTopLevel(body, s)
	if e != nil {
		return e
	}
	f.set = s
	for i, n := range s.names {
		f.v[i] = obj[n]
	}
	return nil
}

// topMembers is the top-level members of body, which a Parse* function
// accepted: scanned, not validated again. The run path reads them
// (extraMembers carries those no name covers); validation reads fields.
func topMembers(body []byte) object {
	if o, _, ok := scanObject(trimJSONSpace(body), nil); ok {
		return o
	}
	o, _, _ := decodeObject(trimJSONSpace(body), nil) // the scan's backstop
	return o
}

// trimJSONSpace is b without the whitespace JSON allows around a value
// (space, tab, line feed, carriage return).
func trimJSONSpace(b []byte) []byte {
	b = b[skipWS(b, 0):]
	end := len(b)
	for end > 0 {
		switch b[end-1] {
		case ' ', '\t', '\r', '\n':
			end--
			continue
		}
		break
	}
	return b[:end]
}

// decodeObject is json.Unmarshal of body into an object, validating once
// and cutting the members out by scanning in the common case; flagged as
// objectOf's.
func decodeObject(body []byte, s *memberSet) (object, string, error) {
	if body[0] == '{' && valid(body) {
		if obj, flagged, ok := scanObject(body, s); ok {
			return obj, flagged, nil
		}
	}
	var obj object // not a named result: see objectOf
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, "", err
	}
	if obj == nil {
		return nil, "", nil
	}
	return obj, s.flagUnscanned(obj, body), nil
}

// kindOf names the JSON type of raw for error messages.
func kindOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	case '[':
		return "an array"
	case '{':
		return "an object"
	default:
		if isIntegerLiteral(raw) {
			return "an integer"
		}
		return "a number"
	}
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

func typeError(param, expected string, got json.RawMessage) *Error {
	return InvalidRequest(fmt.Sprintf("Invalid type for '%s': expected %s, but got %s instead.",
		param, expected, kindOf(got)), param)
}

func missingParam(param string) *Error {
	return InvalidRequest(fmt.Sprintf("Missing required parameter: '%s'.", param), param)
}

func invalidValue(param, why string) *Error {
	return InvalidRequest(fmt.Sprintf("Invalid value for '%s': %s", param, why), param)
}

// pname names a request parameter in an error message, in the shape
// base[i]mid[j]field (an index of -1 is absent), e.g.
// messages[2].content[0].text. The validators of each message, content part
// and tool take one rather than a formatted string, so that the name is
// built only when an error reports it, not for every element of every
// request.
type pname struct {
	base  string
	i     int
	mid   string
	j     int
	field string
}

// pn names a parameter that needs no index.
func pn(name string) pname { return pname{base: name, i: -1, j: -1} }

// dot returns p with field as its last part.
func (p pname) dot(field string) pname {
	p.field = field
	return p
}

func (p pname) String() string {
	if p.i < 0 && p.j < 0 && p.mid == "" && p.field == "" {
		return p.base
	}
	b := make([]byte, 0, len(p.base)+len(p.mid)+len(p.field)+16)
	b = append(b, p.base...)
	if p.i >= 0 {
		b = append(strconv.AppendInt(append(b, '['), int64(p.i), 10), ']')
	}
	b = append(b, p.mid...)
	if p.j >= 0 {
		b = append(strconv.AppendInt(append(b, '['), int64(p.j), 10), ']')
	}
	return string(append(b, p.field...))
}

// The scalar validators below read the value's bytes directly instead of
// calling json.Unmarshal, which would re-validate and reflect for every
// field: every value here was cut from a document that json.Unmarshal has
// already validated, so its first byte tells its JSON type, and a string
// decodes as asString does.

// Each validator takes a member's raw value, nil when the member is
// absent (an object's map or fields give nil for a name not sent), and
// the parameter's name for its error.

// requiredString returns raw as a non-blank string.
func requiredString(raw json.RawMessage, param string) (string, *Error) {
	return requiredStringAt(raw, pn(param))
}

func requiredStringAt(raw json.RawMessage, p pname) (string, *Error) {
	if raw == nil || isNull(raw) {
		return "", missingParam(p.String())
	}
	s, ok := asString(raw)
	if !ok {
		return "", typeError(p.String(), "a string", raw)
	}
	if strings.TrimSpace(s) == "" {
		return "", invalidValue(p.String(), "expected a non-empty string.")
	}
	return s, nil
}

// optString checks that raw, when present and not null, is a string.
func optString(raw json.RawMessage, param string) (string, bool, *Error) {
	return optStringAt(raw, pn(param))
}

func optStringAt(raw json.RawMessage, p pname) (string, bool, *Error) {
	if raw == nil || isNull(raw) {
		return "", false, nil
	}
	s, ok := asString(raw)
	if !ok {
		return "", false, typeError(p.String(), "a string", raw)
	}
	return s, true, nil
}

// optBool checks that raw, when present and not null, is a boolean.
func optBool(raw json.RawMessage, param string) (bool, *Error) {
	if raw == nil {
		return false, nil
	}
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		return true, nil
	case "false", "null":
		return false, nil
	}
	return false, typeError(param, "a boolean", raw)
}

// optNumber checks that raw, when present and not null, is a number (one
// that fits a float64, as json.Unmarshal into a float64 requires).
func optNumber(raw json.RawMessage, param string) *Error {
	if raw == nil || isNull(raw) {
		return nil
	}
	t := bytes.TrimSpace(raw)
	if len(t) > 0 && (t[0] == '-' || (t[0] >= '0' && t[0] <= '9')) {
		_, err := strconv.ParseFloat(string(t), 64)
		if err == nil {
			return nil
		}
		if isRangeErr(err) {
			// A number all the same (1e400): "expected a number, but got
			// a number" would leave the caller guessing.
			return invalidValue(param, fmt.Sprintf("expected a number of magnitude at most %g, but got %s.",
				math.MaxFloat64, shortNumber(string(t))))
		}
	}
	return typeError(param, "a number", raw)
}

// optInt checks that raw, when present and not null, is an integer in
// [min, max]. Integral values written as floats (1e3, 100.0) are accepted
// because some JSON encoders emit every number that way.
func optInt(raw json.RawMessage, param string, min, max int64) (int64, bool, *Error) {
	if raw == nil || isNull(raw) {
		return 0, false, nil
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || !(raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')) {
		return 0, false, typeError(param, "an integer", raw)
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(raw), 64)
		if ferr != nil && !isRangeErr(ferr) {
			return 0, false, typeError(param, "an integer", raw)
		}
		if f != math.Trunc(f) {
			return 0, false, typeError(param, "an integer", raw)
		}
		// float64(math.MaxInt64) is 2^63, which no int64 holds: a float
		// that rounds to it is out of range, not converted.
		if f < float64(min) || f > float64(max) || f >= 0x1p63 || math.IsInf(f, 0) {
			return 0, false, rangeError(param, min, max, string(raw))
		}
		v = int64(f)
	}
	if v < min || v > max {
		return 0, false, rangeError(param, min, max, string(raw))
	}
	return v, true, nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func rangeError(param string, min, max int64, got string) *Error {
	return invalidValue(param, fmt.Sprintf("expected an integer between %d and %d, but got %s.", min, max, shortNumber(got)))
}

// shortNumber is a number literal for an error message, bounded: a valid
// literal can be a thousand digits long.
func shortNumber(got string) string {
	if len(got) > 32 {
		return got[:32] + "…"
	}
	return got
}

// isIntegerLiteral reports whether a JSON number literal has no fraction or
// exponent.
func isIntegerLiteral(raw []byte) bool {
	for _, c := range raw {
		if c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}

// optObject checks that raw, when present and not null, is an object and
// returns it (nil when absent).
func optObject(raw json.RawMessage, param string) (object, *Error) {
	return optMembersAt(raw, pn(param), nil)
}

func optObjectAt(raw json.RawMessage, p pname) (object, *Error) {
	return optMembersAt(raw, p, nil)
}

// optMembersAt is optObjectAt that also refuses a case variant of one of
// s's names in the object, or one of them given twice (members.go).
func optMembersAt(raw json.RawMessage, p pname, s *memberSet) (object, *Error) {
	if raw == nil || isNull(raw) {
		return nil, nil
	}
	o, flagged, ok := objectOf(raw, s)
	if !ok {
		return nil, typeError(p.String(), "an object", raw)
	}
	if flagged != "" {
		return nil, s.refuse(flagged, p)
	}
	return o, nil
}

// optFieldsAt is optMembersAt for an object read only through s's names:
// it fills f (fieldsOf) and reports whether the object was given.
func optFieldsAt(raw json.RawMessage, p pname, s *memberSet, f *fields) (bool, *Error) {
	if raw == nil || isNull(raw) {
		return false, nil
	}
	flagged, ok := f.read(raw, s)
	if !ok {
		return false, typeError(p.String(), "an object", raw)
	}
	if flagged != "" {
		return false, s.refuse(flagged, p)
	}
	return true, nil
}

// fieldsOf is objectOf for an object read only through s's names: the raw
// value of each goes to dst (scanFields), and flagged is as objectOf's.
func fieldsOf(raw json.RawMessage, s *memberSet, dst []json.RawMessage) (flagged string, ok bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' {
		return "", false
	}
	if flagged, ok := scanFields(t, s, dst); ok {
		return flagged, true
	}
	var o object // the backstop, as in objectOf
	if json.Unmarshal(t, &o) != nil || o == nil {
		return "", false
	}
	for i, n := range s.names {
		dst[i] = o[n]
	}
	return s.flagUnscanned(o, t), true
}

// checkObject is optObject for a value that is only type-checked: it does
// not decode the object (a tool's parameter schema can be large and deep).
func checkObject(raw json.RawMessage, p pname) *Error {
	if raw == nil || isNull(raw) {
		return nil
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return typeError(p.String(), "an object", raw)
	}
	return nil
}

// optArray checks that raw, when present and not null, is an array and
// returns its elements (nil when absent).
func optArray(raw json.RawMessage, param string) ([]json.RawMessage, bool, *Error) {
	return optArrayAt(raw, pn(param))
}

func optArrayAt(raw json.RawMessage, p pname) ([]json.RawMessage, bool, *Error) {
	if raw == nil || isNull(raw) {
		return nil, false, nil
	}
	arr, ok := asArray(raw)
	if !ok {
		return nil, false, typeError(p.String(), "an array", raw)
	}
	return arr, true, nil
}

func asArray(raw json.RawMessage) ([]json.RawMessage, bool) {
	return appendArray([]json.RawMessage{}, raw)
}

// appendArray is asArray appending to dst (appendElements).
func appendArray(dst []json.RawMessage, raw json.RawMessage) ([]json.RawMessage, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '[' {
		return nil, false
	}
	if arr, ok := appendElements(dst, t); ok {
		return arr, true
	}
	var arr []json.RawMessage
	if json.Unmarshal(t, &arr) != nil {
		return nil, false
	}
	return arr, true
}

func asObject(raw json.RawMessage) (object, bool) {
	o, _, ok := objectOf(raw, nil)
	return o, ok
}

// objectOf is asObject that also returns the first member of raw whose name
// is a case variant of one of s's names, or one of them given twice, as
// scanObject flags them (members.go), or "".
func objectOf(raw json.RawMessage, s *memberSet) (object, string, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' {
		return nil, "", false
	}
	if o, flagged, ok := scanObject(t, s); ok {
		return o, flagged, true
	}
	// Declared here, not as a named result: the address Unmarshal takes
	// would move the result to the heap on every call, scanned or not.
	var o object
	if json.Unmarshal(t, &o) != nil || o == nil {
		return nil, "", false
	}
	return o, s.flagUnscanned(o, t), true
}

func asString(raw json.RawMessage) (string, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '"' {
		return "", false
	}
	// Fast path for the common escape-free string: every RawMessage here was
	// cut from an already validated document, so the quotes delimit it, and
	// re-running encoding/json's validation would dominate parsing of
	// multi-MiB prompts.
	if plainString(t) {
		return intern(t[1 : len(t)-1]), true
	}
	if len(t) >= 2 && t[0] == '"' && t[len(t)-1] == '"' {
		if s, ok := unquote(t[1 : len(t)-1]); ok {
			return s, true
		}
	}
	var s string
	if json.Unmarshal(t, &s) != nil {
		return "", false
	}
	return s, true
}

// plainString reports whether t (trimmed) is a quoted string with no
// escapes, which decodes to the bytes between its quotes.
func plainString(t []byte) bool {
	// The common string, printable ASCII, in one pass.
	if n := len(t); n >= 2 && t[0] == '"' && t[n-1] == '"' && asciiRun(t[1:n-1]) == n-2 {
		return true
	}
	return len(t) >= 2 && t[0] == '"' && t[len(t)-1] == '"' && bytes.IndexByte(t[1:len(t)-1], '\\') < 0 &&
		bytes.IndexByte(t[1:len(t)-1], '"') < 0 && utf8.Valid(t)
}

// stringLen is len(s) for the string asString would return, without
// decoding it (a message's content can be megabytes that validation only
// measures). FuzzStringLen holds it to asString.
func stringLen(raw json.RawMessage) (int, bool) {
	t := bytes.TrimSpace(raw)
	if plainString(t) {
		return len(t) - 2, true
	}
	if len(t) >= 2 && t[0] == '"' && t[len(t)-1] == '"' {
		if n, ok := unquotedLen(t[1 : len(t)-1]); ok {
			return n, true
		}
	}
	s, ok := asString(raw)
	return len(s), ok
}

// unquotedLen is the length of the UTF-8 that encoding/json decodes the
// string body b (between its quotes) to: an escape counts as the bytes it
// stands for, a \u escape as its rune's UTF-8 (a valid surrogate pair as
// one rune, any other surrogate as U+FFFD), and a byte that is not UTF-8
// as U+FFFD. ok is false for anything unexpected (an unescaped quote or
// control byte, a broken escape), which the caller leaves to asString.
func unquotedLen(b []byte) (n int, ok bool) {
	for i := 0; i < len(b); {
		if run := asciiRun(b[i:]); run > 0 { // plain text, eight bytes at a time
			n += run
			i += run
			continue
		}
		c := b[i]
		switch {
		case c == '"' || c < ' ':
			return 0, false
		case c < utf8.RuneSelf && c != '\\':
			n++
			i++
			continue
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				n += utf8.RuneLen(utf8.RuneError)
			} else {
				n += size
			}
			i += size
			continue
		}
		// An escape.
		if i+1 >= len(b) {
			return 0, false
		}
		switch b[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			n++
			i += 2
			continue
		case 'u':
		default:
			return 0, false
		}
		r, ok := hex4(b[i+2:])
		if !ok {
			return 0, false
		}
		i += 6
		if utf16.IsSurrogate(r) {
			if i+1 < len(b) && b[i] == '\\' && b[i+1] == 'u' {
				if r2, ok := hex4(b[i+2:]); ok && utf16.DecodeRune(r, r2) != utf8.RuneError {
					n += 4 // a pair is a rune above U+FFFF
					i += 6
					continue
				}
			}
			r = utf8.RuneError
		}
		n += utf8.RuneLen(r)
	}
	return n, true
}

// unquote is the string encoding/json decodes the string body b (between
// its quotes) to, by the rules unquotedLen counts with, copying the runs
// between escapes whole: encoding/json steps through a long prompt byte by
// byte, and validates it again first. ok is false where unquotedLen's is;
// FuzzAsString holds asString, and so unquote, to encoding/json.
func unquote(b []byte) (string, bool) {
	n, ok := unquotedLen(b)
	if !ok {
		return "", false
	}
	var out strings.Builder
	out.Grow(n)
	for len(b) > 0 {
		k := bytes.IndexByte(b, '\\')
		if k < 0 {
			k = len(b)
		}
		writeUTF8(&out, b[:k])
		if b = b[k:]; len(b) == 0 {
			break
		}
		// An escape, whole: unquotedLen checked every one.
		switch c := b[1]; c {
		case 'b':
			out.WriteByte('\b')
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'u':
			r, _ := hex4(b[2:])
			b = b[6:]
			if utf16.IsSurrogate(r) {
				if len(b) >= 6 && b[0] == '\\' && b[1] == 'u' {
					if r2, ok := hex4(b[2:]); ok {
						if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
							out.WriteRune(d)
							b = b[6:]
							continue
						}
					}
				}
				r = utf8.RuneError
			}
			out.WriteRune(r)
			continue
		default: // '"', '\\', '/'
			out.WriteByte(c)
		}
		b = b[2:]
	}
	return out.String(), true
}

// writeUTF8 writes p with each byte that is not UTF-8 replaced by U+FFFD,
// as encoding/json decodes a string.
func writeUTF8(w *strings.Builder, p []byte) {
	if utf8.Valid(p) {
		w.Write(p)
		return
	}
	for len(p) > 0 {
		r, size := utf8.DecodeRune(p)
		if r == utf8.RuneError && size == 1 {
			w.WriteRune(utf8.RuneError)
		} else {
			w.Write(p[:size])
		}
		p = p[size:]
	}
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// asIntArray reports whether raw is an array of integers (a token array) and
// returns its length.
func asIntArray(raw json.RawMessage) (int, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '[' {
		return 0, false
	}
	var arr []json.Number
	if json.Unmarshal(t, &arr) != nil {
		return 0, false
	}
	for _, n := range arr {
		if !isIntegerLiteral([]byte(n)) {
			return 0, false
		}
	}
	return len(arr), true
}

// quoteValue renders a caller-supplied string for an error message, bounded.
func quoteValue(s string) string { return "'" + truncateForMessage(s) + "'" }

// streamFields validates stream and stream_options (their raw values),
// shared by every endpoint that streams. include_usage only matters when
// streaming (OpenAI ignores it otherwise), so it is reported as false for
// non-stream requests.
func streamFields(rawStream, rawOptions json.RawMessage) (stream, includeUsage bool, e *Error) {
	if stream, e = optBool(rawStream, "stream"); e != nil {
		return false, false, e
	}
	var opts fields
	given, e := optFieldsAt(rawOptions, pn("stream_options"), streamOptionMembers, &opts)
	if e != nil {
		return false, false, e
	}
	if given {
		if includeUsage, e = optBool(opts.get("include_usage"), "stream_options.include_usage"); e != nil {
			return false, false, e
		}
	}
	return stream, stream && includeUsage, nil
}
