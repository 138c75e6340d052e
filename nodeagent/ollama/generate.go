package ollama

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// openAICompletion is the part of an OpenAI legacy completion request the
// adapter maps onto /api/generate.
type openAICompletion struct {
	Prompt json.RawMessage `json:"prompt"`
	Suffix string          `json:"suffix"`
	sampling
}

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

// buildGenerate translates a completion request. /api/generate takes one
// prompt, so an array prompt must hold exactly one string; token-id prompts
// are not supported.
func buildGenerate(input []byte, model string, cfg *config) (*ollamaGenerate, error) {
	var in openAICompletion
	if err := decodeInput(input, &in); err != nil {
		return nil, err
	}
	prompt, err := singlePrompt(in.Prompt)
	if err != nil {
		return nil, err
	}
	opts, err := in.sampling.options(cfg)
	if err != nil {
		return nil, err
	}
	return &ollamaGenerate{
		Model:     model,
		Prompt:    prompt,
		Suffix:    in.Suffix,
		Stream:    true,
		Options:   opts,
		KeepAlive: cfg.keepAlive,
	}, nil
}

func singlePrompt(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", fmt.Errorf("%w: prompt is required", errBadInput)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", fmt.Errorf("%w: prompt must be a string or an array of strings", errBadInput)
	}
	if len(list) != 1 {
		return "", fmt.Errorf("%w: prompt must hold exactly one string, got %d", errBadInput, len(list))
	}
	return list[0], nil
}
