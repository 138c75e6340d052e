package openaiapi

import "testing"

// HasTools, which routing reads, is true only when a tool is offered (an
// empty tools array is refused: TestEmptyToolsAndParallelWithoutToolsRefused).
func TestHasToolsOnlyWhenOffered(t *testing.T) {
	for body, want := range map[string]bool{
		`"tools":null`: false,
		`"tools":[{"type":"function","function":{"name":"f"}}]`: true,
		`"tools":[{"type":"custom","custom":{"name":"c"}}]`:     true,
	} {
		r, err := ParseChat([]byte(chatWith(body)))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if r.HasTools != want {
			t.Errorf("%s: HasTools = %v, want %v", body, r.HasTools, want)
		}
	}
}
