package jsonenc

import (
	"encoding/json"
	"testing"
)

func TestMarshalKeepsHTMLAndDropsNewline(t *testing.T) {
	b, err := Marshal(map[string]string{"t": "<tool_call>&</tool_call>"})
	if err != nil || string(b) != `{"t":"<tool_call>&</tool_call>"}` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	if _, err := Marshal(json.RawMessage(`{bad`)); err == nil {
		t.Fatal("invalid RawMessage encoded")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Must did not panic on an invalid value")
		}
	}()
	Must("test", json.RawMessage(`{bad`))
}

// appendStringCases are the seeds of FuzzAppendString and the cases of
// TestAppendString: every escape class, HTML, the line separators, invalid
// UTF-8 at every position, and a prefix already in dst.
var appendStringCases = []string{
	"", "plain", `"quoted" \ back\slash`, "\b\f\n\r\t", "\x00\x01\x1f\x7f",
	"<tool_call>&amp;</tool_call>", "a\u2028b\u2029c", "日本語 🙂",
	"\xff", "a\xffb", "\xe6\x97", "\xed\xa0\x80", "\xf4\x90\x80\x80", "end\xc3",
	"\ufffd", "a\xef\xbf\xbdb\xef\xbf",
}

func TestAppendString(t *testing.T) {
	for _, s := range appendStringCases {
		want, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got := AppendString([]byte("head:"), s)
		if string(got) != "head:"+string(want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got[5:], want)
		}
	}
}

func TestAppendStringAllocatesNothingWithRoom(t *testing.T) {
	buf := make([]byte, 0, 256)
	s := "some \"text\"\n with \u2028 and \xff"
	if n := testing.AllocsPerRun(100, func() { buf = AppendString(buf[:0], s) }); n != 0 {
		t.Fatalf("AppendString allocated %.0f times into a buffer with room", n)
	}
}

// FuzzAppendString holds AppendString to Marshal for any string.
func FuzzAppendString(f *testing.F) {
	for _, s := range appendStringCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	})
}
