package nodewire

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// maxNodeElements bounds what one frame from a node may decode into on the
// edge: embedded messages (and map entries) plus elements of repeated
// string and bytes fields, at every depth. Protobuf spends two bytes on an
// empty embedded message that decodes into a struct of a hundred or more:
// a 16 MiB command answer of empty provider snapshots decoded into 8.4
// million of them, 1.7 GB, from one frame of a node holding a valid token.
// The largest real answers (capabilities of a hundred providers of a
// thousand models each) stay well under it.
const maxNodeElements = 1 << 18

// scanFanoutAbove: frames up to this size are not scanned; what they can
// decode into is bounded by their size (at most ~100 bytes per byte).
const scanFanoutAbove = eagerPayload

// errFanout: a frame that would decode into more than maxNodeElements.
var errFanout = fmt.Errorf("%w: a frame decodes into more than %d elements", ErrProtocol, maxNodeElements)

var envelopeDesc = (&iop.Envelope{}).ProtoReflect().Descriptor()

// checkFanout refuses a payload over scanFanoutAbove bytes that would decode
// into more than budget elements (see maxNodeElements); budget <= 0 means
// no bound. It reads the tags only, skipping every scalar, string and
// bytes value, so a tunnel BODY frame costs a few steps whatever its size.
// A payload it cannot parse is left to the decoder to refuse.
func checkFanout(payload []byte, budget int) error {
	if budget <= 0 || len(payload) <= scanFanoutAbove {
		return nil
	}
	left := budget
	if err := countElements(payload, envelopeDesc, &left); err != nil {
		return err
	}
	return nil
}

// errStopScan ends a scan early: the payload is malformed (the decoder
// reports it).
var errStopScan = errors.New("nodewire: stop scan")

func countElements(b []byte, md protoreflect.MessageDescriptor, left *int) error {
	err := walkElements(b, md, left)
	if errors.Is(err, errStopScan) {
		return nil
	}
	return err
}

// walkElements counts b's elements against left. It recurses only into
// fields the schema declares as messages, and runtime.proto has no message
// that contains itself, so the depth is the schema's, whatever the bytes.
func walkElements(b []byte, md protoreflect.MessageDescriptor, left *int) error {
	fields := md.Fields()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errStopScan
		}
		b = b[n:]
		fd := fields.ByNumber(num)
		if typ != protowire.BytesType || fd == nil {
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return errStopScan
			}
			b = b[m:]
			continue
		}
		v, m := protowire.ConsumeBytes(b)
		if m < 0 {
			return errStopScan
		}
		b = b[m:]
		switch {
		case fd.Kind() == protoreflect.MessageKind:
			if *left--; *left < 0 {
				return errFanout
			}
			if fd.IsMap() {
				continue // an entry: a key and a value, no deeper messages here
			}
			if err := walkElements(v, fd.Message(), left); err != nil {
				return err
			}
		case fd.IsList(): // repeated string or bytes
			if *left--; *left < 0 {
				return errFanout
			}
		}
	}
	return nil
}
