package openaiapi

import "testing"

// An empty tools array, and parallel_tool_calls without tools, are refused
// as OpenAI refuses them, word for word and with the same param; null
// stands for absent in both, and parallel_tool_calls with any tool (a
// function or not) passes.
func TestEmptyToolsAndParallelWithoutToolsRefused(t *testing.T) {
	const (
		emptyMsg    = "Invalid 'tools': empty array. Expected an array with minimum length 1, but got an empty array instead."
		parallelMsg = "Invalid value for 'parallel_tool_calls': 'parallel_tool_calls' is only allowed when 'tools' are specified."
	)
	for _, tc := range []struct{ body, param, msg string }{
		{`"tools":[]`, "tools", emptyMsg},
		{`"tools":[],"tool_choice":"none"`, "tools", emptyMsg},
		{`"tools":[],"parallel_tool_calls":false`, "tools", emptyMsg},
		{`"parallel_tool_calls":true`, "parallel_tool_calls", parallelMsg},
		{`"parallel_tool_calls":false`, "parallel_tool_calls", parallelMsg},
		{`"parallel_tool_calls":false,"tools":null`, "parallel_tool_calls", parallelMsg},
		{`"parallel_tool_calls":false,"tool_choice":"none"`, "parallel_tool_calls", parallelMsg},
	} {
		r, err := ParseChat([]byte(chatWith(tc.body)))
		if r != nil {
			t.Fatalf("%s: request = %+v, want nil", tc.body, r)
		}
		wantErr(t, err, tc.param, tc.msg)
		if e := err.(*Error); e.Message != tc.msg || e.Code != CodeInvalidRequest || e.Status != 400 {
			t.Errorf("%s: %d %s %q, want 400 %s %q", tc.body, e.Status, e.Code, e.Message, CodeInvalidRequest, tc.msg)
		}
	}
	for body, single := range map[string]bool{
		`"tools":null`:                            false,
		`"parallel_tool_calls":null`:              false,
		`"tools":null,"parallel_tool_calls":null`: false,
		`"tools":[{"type":"function","function":{"name":"f"}}],"parallel_tool_calls":false`: true,
		`"tools":[{"type":"function","function":{"name":"f"}}],"parallel_tool_calls":true`:  false,
		`"tools":[{"type":"custom","custom":{"name":"c"}}],"parallel_tool_calls":false`:     true,
	} {
		r, err := ParseChat([]byte(chatWith(body)))
		if err != nil {
			t.Errorf("%s: %v", body, err)
			continue
		}
		if r.SingleToolCall != single {
			t.Errorf("%s: SingleToolCall = %v, want %v", body, r.SingleToolCall, single)
		}
	}
}
