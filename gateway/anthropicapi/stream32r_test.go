package anthropicapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// Reasoning held while a tool call's block is open writes nothing until
// the block closes; a model thinking there for long would leave the stream
// silent, and a proxy's read timeout (nginx: 60 s) would cut it. It is
// kept alive as dropped reasoning is: a ping for every
// HiddenThinkingPingBytes held, shown or omitted, and the held text is
// still shown whole after the call's block.
func TestStreamHeldThinkingPings(t *testing.T) {
	for _, omit := range []bool{false, true} {
		var buf bytes.Buffer
		s := NewStreamWriter(&buf, nil, "m", 1, nil, true)
		if omit {
			s.OmitThinking()
		}
		feed(t, s, `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{"}}]}}]}`)
		piece := strings.Repeat("x", HiddenThinkingPingBytes/4)
		for range 12 {
			feed(t, s, `{"choices":[{"index":0,"delta":{"reasoning":"`+piece+`"}}]}`)
		}
		if pings := strings.Count(buf.String(), "event: ping\n"); pings != 3 {
			t.Errorf("omit %v: %d pings while %d bytes were held, want 3", omit, pings, 12*len(piece))
		}
		feed(t, s, `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}}]}`, `[DONE]`)
		checkEvents(t, buf.Bytes())
		if shown := strings.Contains(buf.String(), strings.Repeat(piece, 12)); shown == omit {
			t.Errorf("omit %v: held thinking shown %v", omit, shown)
		}
	}
}

// The name is the schema's "title" member, by its exact name as JSON
// Schema spells it: a root member "Title" or "TITLE" is not a title
// (encoding/json matches struct fields case-insensitively), and a title
// that is not a valid OpenAI name, unicode or too long, gives "response".
func TestFormatNameExactTitle(t *testing.T) {
	for schema, want := range map[string]string{
		`{"Title":"Upper"}`:                           "response",
		`{"TITLE":"Upper","type":"object"}`:           "response",
		`{"title":"Good","Title":"not a name"}`:       "Good",
		`{"Title":"not a name","title":"Good"}`:       "Good",
		`{"title":"Caf\u00e9"}`:                       "response",
		`{"title":"` + strings.Repeat("a", 65) + `"}`: "response",
		`{"title":["A"]}`:                             "response",
		`{"title":"A"}`:                               "A",
	} {
		if got := formatName(json.RawMessage(schema)); got != want {
			t.Errorf("%s: name %q, want %q", schema, got, want)
		}
	}
}
