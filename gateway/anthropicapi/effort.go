package anthropicapi

import (
	"encoding/json"
	"strings"
)

// efforts maps each output_config.effort Anthropic's API takes (low,
// medium, high, xhigh, max; a closed set, refused otherwise) to the
// reasoning_effort the chat body carries, the member by which OpenAI-style
// clients ask the same of every backend here (the ollama adapter maps it
// to think, OpenAI-compatible servers read it as they are).
//
//   - "high" maps to nothing: on Anthropic's API it is the default and
//     means exactly what leaving the effort out means, so it leaves the
//     backend at its own default too, and a request that names it (Claude
//     Code may) keeps working on a model that takes no reasoning_effort.
//   - "xhigh" is OpenAI's name for the same tier.
//   - "max" is past OpenAI's scale; it maps to "xhigh", OpenAI's top,
//     which the ollama adapter reads as Ollama's own "max" (as Ollama's
//     OpenAI layer does). Refusing it would refuse a value Anthropic takes.
var efforts = map[string]string{
	"low":    "low",
	"medium": "medium",
	"high":   "",
	"xhigh":  "xhigh",
	"max":    "xhigh",
}

// outputConfig parses output_config: an object whose effort, when present
// and not null, must be one of Anthropic's levels, and whose format, when
// present and not null, is a JSON output format (parseFormat). Its other
// members (task_budget) are ignored, as unknown members are everywhere.
func outputConfig(raw json.RawMessage) (string, *outputFormat, *Error) {
	obj, e := object(raw, "output_config")
	if e != nil {
		return "", nil, e
	}
	var format *outputFormat
	if rawFormat, ok := field(obj, "format"); ok {
		if format, e = parseFormat(rawFormat, "output_config.format"); e != nil {
			return "", nil, e
		}
	}
	rawEffort, ok := field(obj, "effort")
	if !ok {
		return "", format, nil
	}
	effort, e := str(rawEffort, "output_config.effort")
	if e != nil {
		return "", nil, e
	}
	if _, ok := efforts[effort]; !ok {
		return "", nil, invalid("output_config.effort: must be one of low, medium, high, xhigh, max")
	}
	return effort, format, nil
}

// reasoningEffort is the reasoning_effort the chat body carries for the
// request's output_config.effort: none when thinking is off (thinking off
// decides there: the edge tells the backends that can stop a model
// thinking so, and an effort would ask the others to think after all), or
// when the effort is absent or "high" (see efforts).
func (r *Request) reasoningEffort() string {
	if r.ThinkingOff {
		return ""
	}
	return efforts[r.effort]
}

// ThinkingDisplayUpdatesBeta is the anthropic-beta value under which
// Anthropic's API takes thinking.display "updates"; without it the value
// is refused, as any display Anthropic does not know.
const ThinkingDisplayUpdatesBeta = "thinking-display-updates-2026-08-18"

// CheckBetas refuses what the request may ask only under a beta that
// betas (the request's anthropic-beta header values, each a
// comma-separated list) does not name: thinking.display "updates" needs
// ThinkingDisplayUpdatesBeta. A 400 as Anthropic's API answers it,
// before anything reaches a provider; count_tokens is checked alike.
func (r *Request) CheckBetas(betas []string) *Error {
	if !r.thinkingUpdates || hasBeta(betas, ThinkingDisplayUpdatesBeta) {
		return nil
	}
	return invalid("thinking.display: must be one of summarized, omitted (%q needs the anthropic-beta %s)", "updates", ThinkingDisplayUpdatesBeta)
}

// hasBeta reports whether betas, header values each a comma-separated
// list, name beta (spaces around a name are allowed, as Anthropic's API
// and SDKs write them).
func hasBeta(betas []string, beta string) bool {
	for _, v := range betas {
		for b := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(b) == beta {
				return true
			}
		}
	}
	return false
}
