// Package jsonenc encodes JSON the way iop writes it to peers: without
// HTML escaping (a '<' in text stays '<', as models and clients read it)
// and without the trailing newline json.Encoder adds.
package jsonenc

import (
	"bytes"
	"encoding/json"
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
