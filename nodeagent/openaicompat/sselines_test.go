package openaicompat

import "testing"

// TestEventDataManyLines: an event's data lines are joined with "\n"
// (the SSE rule), however many there are.
func TestEventDataManyLines(t *testing.T) {
	got, ok := eventData([]byte("data: {\"a\":\ndata: 1,\ndata: \"b\":\r\ndata: 2}\n\n"))
	if want := "{\"a\":\n1,\n\"b\":\n2}"; !ok || string(got) != want {
		t.Fatalf("got %q %v, want %q", got, ok, want)
	}
}
