package openaiapi

import (
	"bytes"
	"fmt"
	"strings"
)

// A member whose name differs only in case from one the edge reads is
// refused, and so is one of those names given twice, at every object the
// edge reads members of. The edge looks members up by their exact names,
// the last of duplicates winning, as OpenAI's API and Python or JavaScript
// providers do. Go's encoding/json (Ollama's OpenAI endpoint, LocalAI, most
// Go servers) matches names case-insensitively under Unicode simple
// folding, so to such a provider {"max_tokens":16,"Max_Tokens":9999} or a
// lone "ſtream" reads as a member the edge validated, estimated and relayed
// by another value, or never saw; and parsers disagree on duplicates (the
// first copy, the last, or, in encoding/json, two objects merged). Refusing
// both keeps what the edge checked and what any provider reads the same;
// OpenAI refuses unknown parameters, so no client has a reason to send a
// variant, and JSON asks for names to be unique.
//
// Only the levels the edge reads are checked: the top level of each
// endpoint, stream_options, each message, each content part, each tool and
// its function, and tool_choice with its function. Deeper objects (a tool's
// parameter schema, response_format, an assistant message's earlier calls)
// are either passed through unread or, on the run path, converted into
// typed fields by exact name, which leaves a variant nowhere to go. Unknown
// members (vendor extensions) pass as they are, duplicates included: the
// edge's decisions do not depend on them.

// memberSet is the member names the edge reads in one kind of object.
// Every name is lowercase ASCII, shorter than 64 bytes.
type memberSet struct {
	names []string
	// table finds a name's position in names.
	table *nameTable
	// lens has bit n set when a name is n bytes long: an ASCII key of
	// another length cannot fold to any name, which settles most unknown
	// members without a comparison.
	lens uint64
}

func newMemberSet(names ...string) *memberSet {
	if len(names) > maxMembers {
		panic("openaiapi: more names than fields holds")
	}
	s := &memberSet{names: names, table: newNameTable(names)}
	for _, n := range names {
		if len(n) >= 64 {
			panic("openaiapi: member name too long: " + n)
		}
		for i := 0; i < len(n); i++ {
			if c := n[i]; c >= 0x80 || ('A' <= c && c <= 'Z') {
				panic("openaiapi: member name not lowercase ASCII: " + n)
			}
		}
		s.lens |= 1 << len(n)
	}
	return s
}

// The members each validator reads (and, for the run path, each
// normalizer: normalize.go). TestMemberSetsCoverReads checks that every
// name the package's sources look up is in one of them.
var (
	chatMembers = newMemberSet("model", "messages", "stream", "stream_options",
		"tools", "tool_choice", "parallel_tool_calls", "response_format",
		"max_tokens", "max_completion_tokens", "n", "temperature", "top_p", "top_k",
		"presence_penalty", "frequency_penalty", "seed", "stop",
		"logprobs", "top_logprobs", "user")
	completionMembers = newMemberSet("model", "prompt", "suffix", "echo", "logprobs", "stream", "stream_options",
		"max_tokens", "max_completion_tokens", "n", "temperature", "top_p", "top_k",
		"presence_penalty", "frequency_penalty", "seed", "stop")
	embeddingMembers     = newMemberSet("model", "input", "encoding_format", "dimensions", "user")
	responsesMembers     = newMemberSet("model", "stream", "previous_response_id")
	streamOptionMembers  = newMemberSet("include_usage")
	messageMembers       = newMemberSet(messageNames[:]...)
	contentPartMembers   = newMemberSet(partNames[:]...)
	toolMembers          = newMemberSet("type", "function")
	toolFunctionMembers  = newMemberSet("name", "description", "parameters", "strict")
	toolChoiceMembers    = newMemberSet("type", "function")
	choiceFunctionMember = newMemberSet("name")
)

// refuse is the 400 for key, flagged by scanObject in the object p names
// (pn("") for the top level): a case variant of one of s's names, or one of
// them given twice.
func (s *memberSet) refuse(key string, p pname) *Error {
	param := key
	if at := p.String(); at != "" {
		param = at + "." + key
	}
	if name := s.variantOf(key); name != "" {
		return InvalidRequest(fmt.Sprintf(
			"Unrecognized request argument supplied: %s differs from %s only in case; parameter names are case-sensitive.",
			quoteValue(param), quoteValue(name)), param)
	}
	return InvalidRequest(fmt.Sprintf("The request has more than one %s; send each parameter once.", quoteValue(param)), param)
}

// isVariant is the test scanObject makes of each key: whether k is a
// variant of one of s's names. A nil set checks nothing.
func (s *memberSet) isVariant(k string) bool {
	return s != nil && mayFold(k) && s.variantOf(k) != ""
}

// has reports whether k is one of s's names.
func (s *memberSet) has(k string) bool { return s.index(k) >= 0 }

// index returns the position of k in s's names, or -1.
func (s *memberSet) index(k string) int { return s.table.find(k) }

// firstRepeat returns the first of s's names that the object t (well
// formed, as scanObject found it) gives a second time, or "". Parsers
// disagree on which of two copies counts (most take the last, as the edge
// does; some the first; Go's encoding/json merges two objects, and
// decodes a second array over the first one's elements), so the edge
// could validate one and a provider read the other. Only scanObject's
// error path runs it.
func (s *memberSet) firstRepeat(t []byte) string {
	seen := make(map[string]bool, len(s.names))
	i := skipWS(t, 1)
	for i < len(t) && t[i] == '"' {
		ke := skipString(t, i)
		if k, _ := asString(t[i:ke]); s.has(k) {
			if seen[k] {
				return k
			}
			seen[k] = true
		}
		i = skipWS(t, ke) // at ':'
		i = skipWS(t, skipValue(t, skipWS(t, i+1)))
		if i >= len(t) || t[i] != ',' {
			break
		}
		i = skipWS(t, i+1)
	}
	return ""
}

// flagUnscanned is what scanObject would flag in the valid JSON object t,
// for the encoding/json fallback of objectOf and decodeObject, which decoded
// it into obj: the least variant (in byte order, so not the map's
// iteration order: there is no body order to go by), or else the first
// repeated name. scanObject handles every valid object (FuzzScan), so this
// is a backstop.
func (s *memberSet) flagUnscanned(obj object, t []byte) string {
	if s == nil {
		return ""
	}
	if v := s.leastVariant(obj); v != "" {
		return v
	}
	return s.firstRepeat(bytes.TrimSpace(t))
}

// leastVariant returns the least key of obj (in byte order) that is a
// variant of one of s's names, or "".
func (s *memberSet) leastVariant(obj object) string {
	least := ""
	for k := range obj {
		if s.isVariant(k) && (least == "" || k < least) {
			least = k
		}
	}
	return least
}

// mayFold reports whether k has a byte that is not the lowercase ASCII
// every name is spelt in: an uppercase letter or part of a non-ASCII rune
// (the Kelvin sign folds to "k", the long s to "s"). A key without one
// folds to a name only by being it.
func mayFold(k string) bool {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c >= 0x80 || ('A' <= c && c <= 'Z') {
			return true
		}
	}
	return false
}

// variantOf returns the name k folds to (strings.EqualFold: the folding
// Go's encoding/json matches names by) when k is not that name, or "".
func (s *memberSet) variantOf(k string) string {
	ascii := !hasNonASCII(k)
	if ascii && (len(k) >= 64 || s.lens&(1<<len(k)) == 0) {
		return ""
	}
	for _, n := range s.names {
		if ascii && len(n) != len(k) {
			continue
		}
		if k != n && strings.EqualFold(k, n) {
			return n
		}
	}
	return ""
}

func hasNonASCII(k string) bool {
	for i := 0; i < len(k); i++ {
		if k[i] >= 0x80 {
			return true
		}
	}
	return false
}
