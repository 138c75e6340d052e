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
