package nodewire

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// randomTunnelRequest encodes a ProviderTunnelRequest envelope field by
// field in random order: strings (some not UTF-8), headers, metadata, a
// body of a size around aliasBodyMin (sometimes none, sometimes twice or
// with another wire type), unknown fields, and sometimes a second
// envelope field after it.
func randomTunnelRequest(rng *rand.Rand) []byte {
	str := func() []byte {
		if rng.IntN(20) == 0 {
			return []byte("bad\xff")
		}
		return []byte([]string{"", "vllm", "/chat/completions", "POST", "é", "run_1"}[rng.IntN(6)])
	}
	pair := func(a, b []byte) []byte {
		var m []byte
		m = protowire.AppendTag(m, 1, protowire.BytesType)
		m = protowire.AppendBytes(m, a)
		m = protowire.AppendTag(m, 2, protowire.BytesType)
		return protowire.AppendBytes(m, b)
	}
	var fields [][]byte
	add := func(num protowire.Number, typ protowire.Type, v []byte, x uint64) {
		f := protowire.AppendTag(nil, num, typ)
		if typ == protowire.BytesType {
			f = protowire.AppendBytes(f, v)
		} else {
			f = protowire.AppendVarint(f, x)
		}
		fields = append(fields, f)
	}
	for _, num := range []protowire.Number{1, 2, 3, 4, 10, 11} {
		if rng.IntN(3) > 0 {
			add(num, protowire.BytesType, str(), 0)
		}
	}
	for range rng.IntN(4) {
		add(5, protowire.BytesType, pair(str(), str()), 0)
		add(9, protowire.BytesType, pair(str(), str()), 0)
	}
	add(7, protowire.VarintType, nil, uint64(rng.IntN(2)))
	add(8, protowire.VarintType, nil, uint64(rng.IntN(600)))
	bodies := 1
	switch rng.IntN(8) {
	case 0:
		bodies = 0
	case 1:
		bodies = 2
	}
	for range bodies {
		size := []int{0, 100, aliasBodyMin - 1, aliasBodyMin, 10 << 10, 70 << 10}[rng.IntN(6)]
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		add(6, protowire.BytesType, b, 0)
	}
	if rng.IntN(10) == 0 {
		add(6, protowire.VarintType, nil, 7) // the body field with another wire type
	}
	if rng.IntN(10) == 0 {
		add(50, protowire.VarintType, nil, 1) // unknown
	}
	rng.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
	inner := bytes.Join(fields, nil)
	env := protowire.AppendTag(nil, fieldEnvelopeTunnelRequest, protowire.BytesType)
	env = protowire.AppendBytes(env, inner)
	if rng.IntN(10) == 0 {
		env = append(env, env...) // the envelope field twice: merged
	}
	return env
}

// DecodeEnvelope gives exactly what the generic decoder gives for
// tunnelled requests of every shape (and single-byte corruptions of them),
// and a lone large body points into the payload instead of being copied.
func TestDecodeTunnelRequestMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	aliased := 0
	for n := range 3000 {
		payload := randomTunnelRequest(rng)
		cases := [][]byte{payload}
		if n%5 == 0 {
			m := bytes.Clone(payload)
			m[rng.IntN(len(m))] = byte(rng.IntN(256))
			cases = append(cases, m, m[:rng.IntN(len(m))])
		}
		for _, p := range cases {
			got, err := DecodeEnvelope(p)
			want, werr := decodeGeneric(bytes.Clone(p))
			if (err == nil) != (werr == nil) || err == nil && !proto.Equal(got, want) {
				t.Fatalf("payload %x: DecodeEnvelope %v, %v; generic %v, %v", p, got, err, want, werr)
			}
			if err != nil {
				continue
			}
			if b := got.GetProviderTunnelRequest().GetBody(); len(b) >= aliasBodyMin && within(b, p) {
				aliased++
				if cap(b) != len(b) {
					t.Fatal("an aliased body has room to append into the payload")
				}
			}
		}
	}
	if aliased < 300 {
		t.Fatalf("only %d requests had their body aliased", aliased)
	}
}

// within reports whether b's bytes lie inside p's.
func within(b, p []byte) bool {
	if len(b) == 0 || len(p) == 0 {
		return false
	}
	bs, ps := uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&p[0]))
	return bs >= ps && bs+uintptr(len(b)) <= ps+uintptr(len(p))
}
