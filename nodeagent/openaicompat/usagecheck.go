package openaicompat

import "bytes"

// mayHaveUsage reports whether some event in chunk (whole SSE events) could
// carry a non-null usage object; false means sseUsage returns nil for the
// data of every event in it, so the chunk need not be split and scanned.
// OpenAI's API with include_usage puts "usage":null in every chunk, which a
// search for the key alone lets through.
//
// It is exact in that direction and conservative in the other. sseUsage
// needs the bytes "usage" (quotes included) in the data, hence in the chunk
// (an event's data joins its lines with newlines, which the key does not
// contain); usageOfObject then takes any member whose key encoding/json
// matches, and only an object value decodes to a usage. So the chunk may
// carry one when
//   - an exact "usage" is followed by ':' and '{' (spaces and tabs
//     between), or by a line break or the chunk's end before those (the
//     JSON may go on in the next data line), or
//   - a key in another spelling could match: an escape that can spell an
//     ASCII letter or the long s (\u00.., \u017.), or the letters of
//     "usage" in other cases or with ſ for s.
func mayHaveUsage(chunk []byte) bool {
	exact := false
	for i := 0; ; {
		// The key without its opening quote, checked next: a search led by
		// the quote, the commonest byte of JSON, stops at every string.
		j := bytes.Index(chunk[i:], usageKey[1:])
		if j < 0 {
			break
		}
		at := i + j
		i = at + 1
		if at == 0 || chunk[at-1] != '"' {
			continue
		}
		exact = true
		if usageObjectFollows(chunk[at+len(usageKey)-1:]) {
			return true
		}
	}
	return exact && (bytes.Contains(chunk, []byte(`\u00`)) || bytes.Contains(chunk, []byte(`\u017`)) || hasFoldedUsage(chunk))
}

// usageObjectFollows reports whether b, the bytes after a "usage" key, may
// start its value with an object: ':' then '{', with spaces and tabs
// allowed around the ':', or a line break or the end before those.
func usageObjectFollows(b []byte) bool {
	i := skipBlank(b, 0)
	if i == len(b) || b[i] == '\n' || b[i] == '\r' {
		return true
	}
	if b[i] != ':' {
		return false
	}
	i = skipBlank(b, i+1)
	return i == len(b) || b[i] == '\n' || b[i] == '\r' || b[i] == '{'
}

// skipBlank skips the JSON whitespace that can stand inside one SSE line
// (skipSpace also skips line breaks, which here end the line).
func skipBlank(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	return i
}

// hasFoldedUsage reports whether b spells "usage" other than in lower case:
// ASCII letters in any case, and ſ (U+017F, which folds to s) for the s.
// Every such spelling has its g as its fourth letter, 3 bytes from its
// start (4 with ſ), so only the g's and G's are looked at, each by a
// vectorised byte search: a byte-set scan of the chunk for capitals cost a
// nanosecond a byte, run for every chunk of a stream that asked for usage
// (its "usage":null sends each chunk here).
func hasFoldedUsage(b []byte) bool {
	for _, g := range [...]byte{'g', 'G'} {
		for i := 0; i < len(b); i++ {
			j := bytes.IndexByte(b[i:], g)
			if j < 0 {
				break
			}
			i += j
			if foldedUsageAround(b, i-3) || foldedUsageAround(b, i-4) {
				return true
			}
		}
	}
	return false
}

// foldedUsageAround reports whether a spelling of "usage" other than the
// lower-case one starts at b[start] (start may be negative: none).
func foldedUsageAround(b []byte, start int) bool {
	if start < 0 {
		return false
	}
	n := foldedUsageAt(b[start:])
	return n > 0 && !bytes.Equal(b[start:start+n], usageWord)
}

// usageWord is the key's one spelling an exact search already finds.
var usageWord = usageKey[1 : len(usageKey)-1]

// foldedUsageAt returns the length of a case-folded "usage" at the start
// of b (5 bytes, 6 with ſ), or 0.
func foldedUsageAt(b []byte) int {
	n := 0
	for _, want := range []byte("usage") {
		switch {
		case n < len(b) && b[n]|0x20 == want:
			n++
		case want == 's' && n+1 < len(b) && b[n] == 0xc5 && b[n+1] == 0xbf:
			n += 2
		default:
			return 0
		}
	}
	return n
}
