// Package jsonenc encodes JSON the way iop writes it to peers: without
// HTML escaping (a '<' in text stays '<', as models and clients read it)
// and without the trailing newline json.Encoder adds.
package jsonenc

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Marshal encodes v. It fails only when v embeds an invalid
// json.RawMessage or a value encoding/json cannot encode.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return b[:len(b)-1], nil
}

// Must is Marshal for values whose encoding cannot fail (strings, numbers,
// well-formed structs and RawMessages the caller validated); it panics
// otherwise, naming who.
func Must(who string, v any) []byte {
	b, err := Marshal(v)
	if err != nil {
		panic(who + ": encoding internal value: " + err.Error())
	}
	return b
}

// AppendString appends s encoded as a JSON string, byte for byte as Marshal
// encodes a string: '"', '\\' and control characters escaped (\b \f \n \r
// \t by name, the rest as \u00XX), U+2028 and U+2029 escaped, each byte of
// invalid UTF-8 replaced by \ufffd, and HTML characters left as they are.
// It is encoding/json's string encoder without its HTML escaping, for
// callers that write a document around one string many times (a stream's
// chunks) and would otherwise marshal a struct each time. FuzzAppendString
// holds it to Marshal.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		// Valid JSON, but not valid JavaScript before ES2019: escaped, as
		// encoding/json does.
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"
