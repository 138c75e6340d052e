package ollama

import (
	"encoding/json"
	"fmt"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The caller's members no typed field of the run input carries arrive in
// RunInput.extra (one JSON object). Ollama's native API takes none of them
// as they are; the few it has an equivalent for are read here, each
// operation decoding only its own so that an odd member meant for another
// backend cannot fail a request that has no use for it. encoding/json is
// used as Ollama's own OpenAI layer uses it (gin's binding), so the same
// bodies are accepted and refused.

// chatExtra is what a chat or a completion reads from extra: OpenAI's
// reasoning effort, as reasoning_effort (Chat Completions) or
// reasoning.effort (the Responses shape, which some clients send to chat
// completions too).
type chatExtra struct {
	Reasoning *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	ReasoningEffort *string `json:"reasoning_effort"`
}

// embedExtra is what an embedding reads from extra: Ollama's own truncate
// switch, for callers who want its silent truncation back.
type embedExtra struct {
	Truncate *bool `json:"truncate"`
}

// decodeExtra decodes in's extra members into v; no members leave v as is.
// what describes the members v reads: the caller's error message, as the
// decoder's own names Go types (it stays in Err, for logs).
func decodeExtra(in *iop.RunInput, v any, what string) error {
	raw := in.GetExtra()
	if len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return &adapter.Error{Code: adapter.CodeInvalidRequest, Message: what, Err: fmt.Errorf("ollama: extra members: %w", err)}
	}
	return nil
}

// thinkOf is the think value (/api/chat, /api/generate) for the reasoning
// effort among in's extra members (chatExtra.think).
func thinkOf(in *iop.RunInput) (json.RawMessage, error) {
	var extra chatExtra
	if err := decodeExtra(in, &extra, "reasoning_effort must be a string and reasoning an object with a string effort"); err != nil {
		return nil, err
	}
	return extra.think()
}

// think is the think value for the caller's reasoning effort, or nil
// (Ollama's default: a model that can think does) when none was given.
// reasoning.effort wins over reasoning_effort, as in Ollama.
func (e *chatExtra) think() (json.RawMessage, error) {
	var effort string
	switch {
	case e.Reasoning != nil:
		effort = e.Reasoning.Effort
	case e.ReasoningEffort != nil:
		effort = *e.ReasoningEffort
	}
	return thinkFromReasoningEffort(effort)
}

// thinkFromReasoningEffort maps an OpenAI reasoning effort onto Ollama's
// think value exactly as Ollama's own /v1/chat/completions does
// (openai/openai.go, thinkFromReasoningEffort): "none" turns thinking off,
// Ollama's tiers pass as they are, and efforts past either end of its scale
// are clamped to the nearest tier rather than refused. An unknown effort is
// the caller's error, with Ollama's wording.
func thinkFromReasoningEffort(effort string) (json.RawMessage, error) {
	switch effort {
	case "":
		return nil, nil
	case "none":
		return json.RawMessage(`false`), nil
	case "minimal":
		return json.RawMessage(`"low"`), nil
	case "low", "medium", "high", "max":
		return json.RawMessage(`"` + effort + `"`), nil
	case "xhigh", "ultra":
		return json.RawMessage(`"max"`), nil
	default:
		return nil, fmt.Errorf("%w: invalid reasoning value: %q (must be \"minimal\", \"low\", \"medium\", \"high\", \"xhigh\", \"ultra\", \"max\", or \"none\")", errBadInput, boundText(effort, ""))
	}
}
