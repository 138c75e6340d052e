package anthropicapi

import "testing"

// A beta is named exactly: a list member that only contains the display
// beta's name (a longer or prefixed name, another beta's date) does not
// grant it, wherever it stands in the list.
func TestCheckBetasNamesExactly(t *testing.T) {
	r := mustParse(t, `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"adaptive","display":"updates"}}`)
	for _, betas := range [][]string{
		{"thinking-display-updates-2026-08-18-v2"},
		{"x-thinking-display-updates-2026-08-18"},
		{"a,thinking-display-updates-2026-08-18x"},
		{"thinking-display-updates-2026-08-18;q=1"},
		{""},
	} {
		if e := r.CheckBetas(betas); e == nil {
			t.Errorf("betas %q granted the display beta", betas)
		}
	}
}
