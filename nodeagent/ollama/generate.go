package ollama

import (
	"encoding/json"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// ollamaGenerate is the body of POST /api/generate. Ollama applies the
// model's prompt template (raw is not set), as its own OpenAI-compatible
// /v1/completions does.
type ollamaGenerate struct {
	Model     string          `json:"model"`
	Prompt    string          `json:"prompt"`
	Suffix    string          `json:"suffix,omitempty"`
	Stream    bool            `json:"stream"`
	Options   map[string]any  `json:"options,omitempty"`
	KeepAlive json.RawMessage `json:"keep_alive,omitempty"`
}

// buildGenerate translates a completion input (one prompt).
func buildGenerate(in *iop.RunInput, model string, cfg *config) *ollamaGenerate {
	return &ollamaGenerate{
		Model:     model,
		Prompt:    in.GetPrompt(),
		Suffix:    in.GetSuffix(),
		Stream:    true,
		Options:   options(in.GetSampling(), cfg),
		KeepAlive: cfg.keepAlive,
	}
}
