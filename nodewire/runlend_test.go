package nodewire

import (
	"testing"

	"google.golang.org/protobuf/proto"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// FuzzRunEnvelopeDecode holds runEnvelope.decode to decodeGeneric: what it
// accepts, decodeGeneric accepts with an equal result, whatever the
// runEnvelope held before; and a DELTA event that decodeGeneric's
// generated decoder accepts from a payload that is only the event, it
// accepts too (it is lent).
func FuzzRunEnvelopeDecode(f *testing.F) {
	for _, env := range []*iop.Envelope{
		runDeltaEnv(1, "a"),
		runDeltaEnv(2, "a longer delta"),
		{Body: &iop.Envelope_RunEvent{RunEvent: &iop.RunEvent{RunId: "r", Type: iop.RunEventType_RUN_EVENT_TYPE_DELTA,
			Error: &iop.RunError{Message: "x"}, Output: []byte{1, 2}}}},
		{Body: &iop.Envelope_RunEvent{RunEvent: &iop.RunEvent{RunId: "r", Type: iop.RunEventType_RUN_EVENT_TYPE_COMPLETE}}},
		{Body: &iop.Envelope_Heartbeat{Heartbeat: &iop.Heartbeat{}}},
	} {
		b, err := proto.Marshal(env)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x3a, 0x02, 0x08})       // run_event, truncated
	f.Add([]byte{0x3a, 0x02, 0x12, 0xff}) // run_event, run id not UTF-8 (truncated)
	prior, err := proto.Marshal(runDeltaEnv(9, "held before"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		re := &runEnvelope{}
		if !re.decode(prior) {
			t.Fatal("a DELTA event was not decoded")
		}
		got := re.decode(payload)
		want, err := decodeGeneric(payload)
		if got {
			if err != nil {
				t.Fatalf("decode accepted what decodeGeneric refuses (%v)", err)
			}
			if !proto.Equal(&re.env, want) {
				t.Fatalf("decode %v, decodeGeneric %v", &re.env, want)
			}
			if re.env.GetRunEvent() != &re.ev {
				t.Fatal("decoded into another event than re's own")
			}
			return
		}
		// Refused: fine where decodeGeneric's own generated decoder
		// would have refused too (it then falls back to proto.Unmarshal).
		fresh := &iop.Envelope{}
		fast := fresh.CheckMapEntries(payload) && fresh.UnmarshalVT(payload) == nil && !fresh.HasUnknownFields() && fresh.ValidUTF8()
		if _, only := onlyEnvelopeField(payload, fieldEnvelopeRunEvent); only && fast &&
			fresh.GetRunEvent().GetType() == iop.RunEventType_RUN_EVENT_TYPE_DELTA {
			t.Fatalf("a DELTA event decodeGeneric's decoder accepts was not lent: %v", fresh)
		}
	})
}
