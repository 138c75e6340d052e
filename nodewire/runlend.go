package nodewire

import (
	"sync"

	"google.golang.org/protobuf/encoding/protowire"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// fieldEnvelopeRunEvent is Envelope.run_event.
const fieldEnvelopeRunEvent protowire.Number = 7

// runEnvelope holds a run's DELTA event as Stream.RecvLent lends it: the
// envelope, its oneof wrapper and the event in one object, reused from
// runEnvelopes, so a streamed delta costs no allocation for them. What the
// event holds (its strings, maps and sub-messages) is decoded fresh each
// time and is the caller's to keep; only the three structs are reused.
type runEnvelope struct {
	env  iop.Envelope
	wrap iop.Envelope_RunEvent
	ev   iop.RunEvent
}

var runEnvelopes = sync.Pool{New: func() any { return new(runEnvelope) }}

// decode decodes payload, a whole envelope, into re, which it resets first,
// exactly as decodeGeneric would (the generated decoder fills the oneof it
// finds set, and the same checks follow). It reports false for anything
// but a run's DELTA event that those checks pass, leaving re in no
// particular state: the caller then decodes payload with decodeGeneric,
// which reports any error. Nothing in re points into payload.
func (re *runEnvelope) decode(payload []byte) bool {
	*re = runEnvelope{}
	re.wrap.RunEvent = &re.ev
	re.env.Body = &re.wrap
	if !re.env.CheckMapEntries(payload) || re.env.UnmarshalVT(payload) != nil ||
		re.env.Body != &re.wrap || re.env.HasUnknownFields() || !re.env.ValidUTF8() {
		return false
	}
	return re.ev.Type == iop.RunEventType_RUN_EVENT_TYPE_DELTA
}

// putRunEnvelope clears re, so that the pool keeps nothing of the event
// alive, and hands it back.
func putRunEnvelope(re *runEnvelope) {
	*re = runEnvelope{}
	runEnvelopes.Put(re)
}
