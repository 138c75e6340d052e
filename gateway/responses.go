package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/iop-gateway/iop/gateway/openaiapi"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// responsesRequest is a /v1/responses call's parsed request (call.parsed):
// only acquire reads it, for its previous_response_id. The endpoint is a
// passthrough that no run serves (runRoute refuses it first), so it asks
// for nothing a run would check.
type responsesRequest struct{ *openaiapi.ResponsesRequest }

// RunSupported is nil: whether a run can serve a /v1/responses call is
// runRoute's to say (never), with its own message.
func (responsesRequest) RunSupported() error { return nil }

// RunInput is never called (runRoute refuses the call before any run).
func (responsesRequest) RunInput() (*iop.RunInput, error) {
	return nil, errResponsesNoRun
}

var errResponsesNoRun = errors.New("gateway: /v1/responses is served by the tunnel only")

// previousResponseID is the previous_response_id of k, a /v1/responses
// call, or "".
func previousResponseID(k *call) string {
	if r, ok := k.parsed.(responsesRequest); ok {
		return r.PreviousResponseID
	}
	return ""
}

// responseIDScanMax bounds how much of a Responses answer is looked at for
// its id: its first 4 KiB. vLLM's and OpenAI's answers carry it in their
// first hundred bytes (the body's first member; the response.created
// event's response object's first member), whatever follows; an answer
// that has not named it by then is not remembered.
const responseIDScanMax = 4 << 10

// responseIDScan finds the id of a Responses API answer as it is relayed,
// from a copy of its first responseIDScanMax bytes: a whole answer's
// top-level "id"; an event stream's first event (response.created), its
// data's response.id. The relay feeds each piece before it writes it: the
// piece that settles the id waits, in cluster mode, for the id's write to
// Redis (Dispatcher.AwaitShared), the pieces before and after it do not.
// Only /v1/responses exchanges have one (tunnelExchange.ids), so no other
// route pays for it.
//
// However the answer is cut into pieces, the scan costs one pass over its
// bound and one JSON decoding: a piece is only copied (and, for an event
// stream, searched for a line break); the decoding waits until it can
// settle the id (an event stream's first data line whole, the bound
// reached, or the answer's end: end).
type responseIDScan struct {
	sse bool
	buf []byte
	// line is where, in buf, an event stream's line being read starts;
	// seen, how much of buf has been searched for its line break.
	line, seen int
}

func newResponseIDScan(sse bool) *responseIDScan {
	return &responseIDScan{sse: sse, buf: make([]byte, 0, 512)}
}

// feed adds the next piece of the answer. done reports that the scan is
// over: id is the answer's id, or "" when it has none within the bound.
// Not done, the answer's end settles it (end).
func (s *responseIDScan) feed(p []byte) (id string, done bool) {
	s.buf = append(s.buf, p[:min(len(p), responseIDScanMax-len(s.buf))]...)
	full := len(s.buf) >= responseIDScanMax
	if s.sse {
		for {
			i := bytes.IndexByte(s.buf[s.seen:], '\n')
			if i < 0 {
				break
			}
			line := bytes.TrimSuffix(s.buf[s.line:s.seen+i], []byte("\r"))
			s.line, s.seen = s.seen+i+1, s.seen+i+1
			if data, ok := sseDataValue(line); ok {
				id, _ := jsonMemberString(data, true, "response", "id")
				return id, true
			}
		}
		s.seen = len(s.buf)
	}
	if !full {
		return "", false
	}
	return s.end(), true
}

// end is the id what was fed settles once no more of the answer comes
// (its end, or the bound): a whole answer's top-level id, or a stream's
// first data line's response.id as far as that line came; else "".
func (s *responseIDScan) end() string {
	if !s.sse {
		id, _ := jsonMemberString(s.buf, true, "id")
		return id
	}
	data, ok := sseDataValue(bytes.TrimSuffix(s.buf[s.line:], []byte("\r")))
	if !ok {
		return ""
	}
	id, _ := jsonMemberString(data, true, "response", "id")
	return id
}

// sseDataValue is the value of line when it is an event stream's data
// line. Comment lines and other fields (event:, id:) are not. A data
// value spread over several data lines is read from its first line only:
// no upstream known to the edge splits a JSON event.
func sseDataValue(line []byte) ([]byte, bool) {
	v, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return nil, false
	}
	return bytes.TrimPrefix(v, []byte(" ")), true
}

// jsonMemberString reads the JSON text b (whole, or a beginning of it) for
// the string at path, a member of the top-level object, then of that
// member's object, and so on. done reports that b settles it: id is the
// string, or "" when b has no such string (not an object, the member of
// another type, or absent). A b cut short before the answer is known is
// not done unless whole says no more will come.
func jsonMemberString(b []byte, whole bool, path ...string) (id string, done bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	id, err := memberString(dec, path)
	if err == nil {
		return id, true
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "", whole
	}
	return "", true // not JSON of that shape
}

// errNoMember: the object has no string at the path.
var errNoMember = errors.New("gateway: no such member")

// memberString reads the object dec is at for the string at path.
func memberString(dec *json.Decoder, path []string) (string, error) {
	if tok, err := dec.Token(); err != nil {
		return "", err
	} else if tok != json.Delim('{') {
		return "", errNoMember
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", err
		}
		if key, _ := tok.(string); key == path[0] {
			if len(path) > 1 {
				return memberString(dec, path[1:])
			}
			v, err := dec.Token()
			if err != nil {
				return "", err
			}
			if s, ok := v.(string); ok {
				return strings.Clone(s), nil
			}
			return "", errNoMember
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", err
		}
	}
	if _, err := dec.Token(); err != nil {
		return "", err
	}
	return "", errNoMember
}
