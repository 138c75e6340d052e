package anthropicapi

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
)

// templateKwargs is the member through which vLLM's and llama.cpp's
// servers pass arguments to the chat template; templateThinkingOff is its
// value that turns thinking off in a template that reads enable_thinking
// (Qwen3, DeepSeek and the like; a template that does not read it ignores
// it).
const (
	templateKwargs      = `"chat_template_kwargs"`
	templateThinkingOff = `{"enable_thinking":false}`
)

// ErrNotChatBody is WithTemplateThinkingOff's refusal of a body that is
// not a JSON object with members.
var ErrNotChatBody = errors.New("anthropicapi: not a chat body")

// WithTemplateThinkingOff returns a copy of chat, a JSON object with
// members (as OpenAIChat and TunnelChat render it, but any valid JSON
// object, whitespace and all), whose chat_template_kwargs turn thinking
// off. Without that member it is added last; an object there keeps its
// other arguments and has enable_thinking set to false, replacing any the
// body had (the request turned thinking off); a value that is not an
// object is replaced. Of repeated members the last is changed, the one
// Python's json (vLLM) and Go's keep. Only that value is re-encoded: the
// rest of the body is copied byte for byte. chat itself is left as it is.
// Anything else (not valid JSON, not an object, no members) is
// ErrNotChatBody.
func WithTemplateThinkingOff(chat []byte) ([]byte, error) {
	// One pass both validates the body (so that the output is valid JSON)
	// and finds its members: about three times faster than json.Valid
	// alone, which walks every byte through a state function, and about
	// 1 µs per KiB over the copy.
	sc := scanner{b: chat}
	sc.space()
	if !sc.byte('{') {
		return nil, ErrNotChatBody
	}
	sc.space()
	if sc.peek() == '}' {
		return nil, ErrNotChatBody
	}
	valStart, valEnd := -1, -1
	for {
		keyStart := sc.i
		if !sc.str() {
			return nil, ErrNotChatBody
		}
		kwargs := isTemplateKwargs(chat[keyStart:sc.i])
		sc.space()
		if !sc.byte(':') {
			return nil, ErrNotChatBody
		}
		sc.space()
		start := sc.i
		if !sc.value(1) {
			return nil, ErrNotChatBody
		}
		if kwargs {
			valStart, valEnd = start, sc.i
		}
		sc.space()
		if sc.byte(',') {
			sc.space()
			continue
		}
		if sc.peek() != '}' {
			return nil, ErrNotChatBody
		}
		break
	}
	end := sc.i // the object's closing brace
	sc.i++
	sc.space()
	if sc.i != len(chat) {
		return nil, ErrNotChatBody
	}
	if valStart < 0 {
		out := make([]byte, 0, len(chat)+2+len(templateKwargs)+len(templateThinkingOff))
		out = append(out, chat[:end]...)
		out = append(out, ',')
		out = append(out, templateKwargs...)
		out = append(out, ':')
		out = append(out, templateThinkingOff...)
		return append(out, chat[end:]...), nil
	}
	value, err := kwargsThinkingOff(chat[valStart:valEnd])
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(chat)-(valEnd-valStart)+len(value))
	out = append(out, chat[:valStart]...)
	out = append(out, value...)
	return append(out, chat[valEnd:]...), nil
}

// kwargsThinkingOff is v (valid JSON) with enable_thinking false: an
// object keeps its other members (re-encoded, in key order); anything else
// becomes templateThinkingOff.
func kwargsThinkingOff(v []byte) ([]byte, error) {
	if v[0] != '{' {
		return []byte(templateThinkingOff), nil
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(v, &args); err != nil {
		return nil, errors.Join(ErrNotChatBody, err)
	}
	args["enable_thinking"] = json.RawMessage("false")
	b, err := json.Marshal(args)
	if err != nil {
		return nil, errors.Join(ErrNotChatBody, err)
	}
	return b, nil
}

// isTemplateKwargs reports whether key (a JSON string, quotes included)
// names chat_template_kwargs, escaped or not.
func isTemplateKwargs(key []byte) bool {
	if string(key) == templateKwargs {
		return true
	}
	if bytes.IndexByte(key, '\\') < 0 {
		return false
	}
	var s string
	return json.Unmarshal(key, &s) == nil && s == templateKwargs[1:len(templateKwargs)-1]
}

// maxScanDepth is the deepest nesting the scanner accepts, as
// encoding/json (whose decoders would refuse anything deeper).
const maxScanDepth = 10000

// scanner validates JSON as encoding/json's json.Valid does (the same
// grammar and depth bound; like it, it does not check UTF-8) while its
// caller walks the top-level members.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// byte consumes c if it is next.
func (s *scanner) byte(c byte) bool {
	if s.peek() == c && s.i < len(s.b) {
		s.i++
		return true
	}
	return false
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// plain marks the bytes a string holds as they are: not a quote, a
// backslash or a control character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// ones and highs are the byte-wise constants of the word-at-a-time test
// in str: (v-ones)&^v&highs is not zero exactly when a byte of v is zero,
// (v-ones*n)&^v&highs when a byte is below n (n <= 0x80).
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// str consumes a string.
func (s *scanner) str() bool {
	if !s.byte('"') {
		return false
	}
	b := s.b
	for i := s.i; i < len(b); {
		// Eight bytes at a time while none of them is special (the
		// bulk of a chat body is string text), then byte by byte.
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			q, e := x^(ones*'"'), x^(ones*'\\')
			if ((x-ones*0x20)&^x|(q-ones)&^q|(e-ones)&^e)&highs != 0 {
				break
			}
			i += 8
		}
		if i >= len(b) {
			break
		}
		if plain[b[i]] {
			i++
			continue
		}
		switch b[i] {
		case '"':
			s.i = i + 1
			return true
		case '\\':
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return false
				}
				i += 6
			default:
				return false
			}
		default: // a control character
			return false
		}
	}
	return false
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// value consumes a value at nesting depth (1 for a member of the body).
func (s *scanner) value(depth int) bool {
	switch c := s.peek(); {
	case c == '"':
		return s.str()
	case c == '{' || c == '[':
		if depth+1 > maxScanDepth {
			return false
		}
		return s.container(c, depth+1)
	case c == 't':
		return s.word("true")
	case c == 'f':
		return s.word("false")
	case c == 'n':
		return s.word("null")
	case c == '-' || isDigit(c):
		return s.number()
	}
	return false
}

// container consumes an object or an array.
func (s *scanner) container(open byte, depth int) bool {
	closing := byte(']')
	if open == '{' {
		closing = '}'
	}
	s.i++
	s.space()
	if s.byte(closing) {
		return true
	}
	for {
		if open == '{' {
			if !s.str() {
				return false
			}
			s.space()
			if !s.byte(':') {
				return false
			}
			s.space()
		}
		if !s.value(depth) {
			return false
		}
		s.space()
		if s.byte(closing) {
			return true
		}
		if !s.byte(',') {
			return false
		}
		s.space()
	}
}

func (s *scanner) word(w string) bool {
	if len(s.b)-s.i < len(w) || string(s.b[s.i:s.i+len(w)]) != w {
		return false
	}
	s.i += len(w)
	return true
}

// number consumes -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (s *scanner) number() bool {
	s.byte('-')
	switch {
	case s.byte('0'):
	case isDigit(s.peek()):
		s.digits()
	default:
		return false
	}
	if s.byte('.') {
		if !isDigit(s.peek()) {
			return false
		}
		s.digits()
	}
	if s.byte('e') || s.byte('E') {
		if !s.byte('+') {
			s.byte('-')
		}
		if !isDigit(s.peek()) {
			return false
		}
		s.digits()
	}
	return true
}

func (s *scanner) digits() {
	for s.i < len(s.b) && isDigit(s.b[s.i]) {
		s.i++
	}
}
