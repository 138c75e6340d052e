package openaiapi

import "encoding/binary"

// valid reports whether b is one JSON value, as encoding/json.Valid does,
// with exactly its answers (FuzzValid and TestValidMatchesEncodingJSON hold
// it to them): the grammar of RFC 8259, whitespace around the value, any
// byte of 0x80 and above inside strings (Valid does not check UTF-8; the
// request checks do, first), and nesting at most maxDepth deep.
//
// It exists for speed: every request body is validated whole, and a long
// prompt made encoding/json's byte-at-a-time state machine the largest
// cost of a request (~250 MB/s). Here the runs of plain bytes inside
// strings — nearly all of a prompt — are crossed eight bytes at a time.
func valid(b []byte) bool {
	// open holds one bit per open container: 1 for an object, 0 for an
	// array. The first 512 levels are on the stack (a handler's stack
	// stays small: it is what a held stream keeps); deeper documents grow
	// it on the heap, up to encoding/json's bound.
	var first [8]uint64
	open := first[:]
	depth := 0
	i := skipWS(b, 0)
	for {
		// A value starts at i.
		if i >= len(b) {
			return false
		}
		switch c := b[i]; {
		case c == '"':
			if i = endOfString(b, i); i < 0 {
				return false
			}
		case c == '{' || c == '[':
			if depth == maxDepth {
				return false
			}
			if depth/64 == len(open) {
				open = append(open, 0)
			}
			if c == '{' {
				open[depth/64] |= 1 << (depth % 64)
			} else {
				open[depth/64] &^= 1 << (depth % 64)
			}
			depth++
			i = skipWS(b, i+1)
			if i < len(b) && (b[i] == '}' && c == '{' || b[i] == ']' && c == '[') {
				depth--
				i++
				break // an empty container is a whole value
			}
			if c == '{' {
				if i = objectKey(b, i); i < 0 {
					return false
				}
			}
			continue // its first value
		case c == '-' || c >= '0' && c <= '9':
			if i = endOfNumber(b, i); i < 0 {
				return false
			}
		case c == 't':
			if i = literal(b, i, "true"); i < 0 {
				return false
			}
		case c == 'f':
			if i = literal(b, i, "false"); i < 0 {
				return false
			}
		case c == 'n':
			if i = literal(b, i, "null"); i < 0 {
				return false
			}
		default:
			return false
		}
		// A value ended at i: close what it ends, or go on to the next.
		for {
			i = skipWS(b, i)
			if depth == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			inObject := open[(depth-1)/64]&(1<<((depth-1)%64)) != 0
			switch {
			case b[i] == ',':
				i = skipWS(b, i+1)
				if inObject {
					if i = objectKey(b, i); i < 0 {
						return false
					}
				}
			case inObject && b[i] == '}' || !inObject && b[i] == ']':
				depth--
				i++
				continue
			default:
				return false
			}
			break
		}
	}
}

// maxDepth is encoding/json's nesting bound.
const maxDepth = 10000

// objectKey reads `"key" :` at i and returns where the member's value may
// start (after whitespace), or -1.
func objectKey(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = endOfString(b, i); i < 0 {
		return -1
	}
	i = skipWS(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipWS(b, i+1)
}

// endOfString returns the index just past the string literal at i, or -1
// when it is not one: unterminated, a byte below 0x20, or a bad escape.
func endOfString(b []byte, i int) int {
	i++
	for {
		i += stringRun(b[i:])
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return -1
				}
				i += 6
			default:
				return -1
			}
		default: // a control byte
			return -1
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// endOfNumber returns the index just past the number at i, or -1:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func endOfNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// literal returns the index just past lit at i, or -1.
func literal(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// SWAR (SIMD within a register) tests on eight bytes at once; each is
// exact about whether any byte of x qualifies.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special reports whether any byte of x ends a plain run inside a string:
// a quote, a backslash, or a byte below 0x20.
func special(x uint64) bool {
	q := x ^ ('"' * lsb)
	s := x ^ ('\\' * lsb)
	return ((q-lsb)&^q|(s-lsb)&^s|(x-0x20*lsb)&^x)&msb != 0
}

// stringRun is the length of b's prefix that a string scan passes over
// without looking: no quote, backslash or byte below 0x20.
func stringRun(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if special(binary.LittleEndian.Uint64(b[i:])) {
			break
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 {
			break
		}
	}
	return i
}

// asciiRun is stringRun for bytes below 0x80 only: the prefix of b whose
// bytes are each one character of one UTF-8 byte, as it is unquoted.
func asciiRun(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if x := binary.LittleEndian.Uint64(b[i:]); x&msb != 0 || special(x) {
			break
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
			break
		}
	}
	return i
}
