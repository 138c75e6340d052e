package gateway

import (
	"testing"
	"unsafe"
)

// A streamed call keeps its call for as long as its stream is held: the
// struct stays in the 288-byte size class (it was 368 B, in 384), its
// flags packed after a one-byte op and no embedding options in it.
func TestCallSizeClass35(t *testing.T) {
	if n := unsafe.Sizeof(call{}); n > 288 {
		t.Errorf("call is %d B, want at most 288 (the size class a held stream pays)", n)
	}
}

// Every request keeps its infoWriter (the connection's writer and the
// request's reqInfo) for as long as it is served: 176 B, not 184 in the
// 192-byte class, with the outcome status beside the linger flag.
func TestInfoWriterSizeClass35(t *testing.T) {
	if n := unsafe.Sizeof(infoWriter{}); n > 176 {
		t.Errorf("infoWriter is %d B, want at most 176", n)
	}
}
