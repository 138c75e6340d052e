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
	// Think is as in ollamaChat: /api/generate takes the same values and
	// refuses them the same way for a model that cannot think.
	Think json.RawMessage `json:"think,omitempty"`
}

// buildGenerate translates a completion input (one prompt). The caller's
// reasoning_effort (or reasoning.effort) sets think as it does for a chat
// (thinkOf): Ollama's own /v1/completions drops it, which would leave a
// thinking model thinking however the caller asked.
func buildGenerate(in *iop.RunInput, model string, cfg *config) (*ollamaGenerate, error) {
	think, err := thinkOf(in)
	if err != nil {
		return nil, err
	}
	return &ollamaGenerate{
		Model:     model,
		Prompt:    in.GetPrompt(),
		Suffix:    in.GetSuffix(),
		Stream:    true,
		Options:   options(in.GetSampling(), cfg),
		KeepAlive: cfg.keepAlive,
		Think:     think,
	}, nil
}
