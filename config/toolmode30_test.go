package config

import (
	"strings"
	"testing"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// tool_mode applies to ollama providers as to openai_compat ones: each
// name reaches the node as its wire enum, unset is auto, and an unknown
// name is refused naming the provider.
func TestToolModeForOllamaProviders(t *testing.T) {
	for mode, want := range map[string]iop.ToolMode{
		"":       iop.ToolMode_TOOL_MODE_AUTO,
		"auto":   iop.ToolMode_TOOL_MODE_AUTO,
		"native": iop.ToolMode_TOOL_MODE_NATIVE,
		"text":   iop.ToolMode_TOOL_MODE_TEXT,
	} {
		c := minimalEdge()
		c.Nodes[0].Providers[0].Type = "ollama"
		c.Nodes[0].Providers[0].ToolMode = mode
		if err := c.Normalize(); err != nil {
			t.Fatalf("tool_mode %q: %v", mode, err)
		}
		if got := c.Nodes[0].Providers[0].WireToolMode(); got != want {
			t.Errorf("tool_mode %q reaches the node as %v, want %v", mode, got, want)
		}
	}

	c := minimalEdge()
	c.Nodes[0].Providers[0].Type = "ollama"
	c.Nodes[0].Providers[0].ToolMode = "Text"
	err := c.Normalize()
	if err == nil || !strings.Contains(err.Error(), `nodes[0].providers[0].tool_mode "Text"`) {
		t.Fatalf("Normalize = %v, want the tool_mode refused", err)
	}
}
