package anthropicapi

import (
	"encoding/json"
	"testing"
)

// An array's items count against the walk's own bound of 5,000 schemas
// that are not properties, as anyOf branches and definitions do: 2,500
// arrays of arrays (5,000 items schemas) keep strict, 2,501 (5,002) do
// not, though their 2,501 properties are within OpenAI's bound.
func TestStrictSchemaCountsItems38m(t *testing.T) {
	nested := `{"type":"array","items":{"type":"array","items":{"type":"string"}}}`
	for _, c := range []struct {
		n    int
		want bool
	}{{2500, true}, {2501, false}} {
		if got := strictSchema(json.RawMessage(strictProps(c.n, nested))); got != c.want {
			t.Errorf("%d arrays of arrays: strict %v, want %v", c.n, got, c.want)
		}
	}
}
