package nodewire

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Builders of protobuf fields for the hand decoders' tests (tunnelhead.go,
// tunnelrequesthand.go): hand-made bytes, including the encodings no
// encoder writes.

func pbBytes(num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
}

func pbString(num protowire.Number, v string) []byte { return pbBytes(num, []byte(v)) }

func pbVarint(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
}

// checkLeftToOthers checks what a hand decoder refused (took false):
// DecodeEnvelope's other decoders keep payload whole, or report it, as
// proto.Unmarshal does.
func checkLeftToOthers(t *testing.T, name string, payload []byte, took bool) {
	t.Helper()
	if took {
		t.Errorf("%s: the hand decoder took %x", name, payload)
	}
	var ref iop.Envelope
	refErr := proto.Unmarshal(payload, &ref)
	env, err := DecodeEnvelope(payload)
	if (err == nil) != (refErr == nil) {
		t.Errorf("%s: DecodeEnvelope %v, proto.Unmarshal %v", name, err, refErr)
	} else if err == nil && !proto.Equal(env, &ref) {
		t.Errorf("%s: DecodeEnvelope %v, proto.Unmarshal %v", name, env, &ref)
	}
}

// checkSameAsProto checks a hand decoder's result for payload, which
// proto.Unmarshal accepts: taken, and equal to proto.Unmarshal's.
func checkSameAsProto(t *testing.T, name string, payload []byte, got *iop.Envelope, took bool) {
	t.Helper()
	var ref iop.Envelope
	if err := proto.Unmarshal(payload, &ref); err != nil {
		t.Fatalf("%s: proto.Unmarshal: %v", name, err)
	}
	if !took || !proto.Equal(got, &ref) {
		t.Errorf("%s: hand decode %v (%v), want %v", name, got, took, &ref)
	}
}
