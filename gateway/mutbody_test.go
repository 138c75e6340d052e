package gateway

import (
	"strings"
	"testing"
	"testing/iotest"
)

// A body longer than declared whose byte past the declared length comes
// with io.EOF in the same read (as the io.Reader contract allows) is read
// whole: that byte is not dropped.
func TestReadAllKeepsTheByteThatCameWithEOF(t *testing.T) {
	for _, body := range []string{"abcd", strings.Repeat("x", 64<<10+1)} {
		declared := int64(len(body) - 1)
		got, err := readAll(iotest.DataErrReader(strings.NewReader(body)), declared)
		if err != nil || string(got) != body {
			t.Errorf("declared %d, sent %d: read %d bytes, %v", declared, len(body), len(got), err)
		}
	}
}
