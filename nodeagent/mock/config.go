package mock

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// TypeName is the AdapterConfig.type this package serves.
const TypeName = "mock"

// Settings keys (AdapterConfig.settings) the mock understands.
const (
	// SettingDelayMS is the pause between two deltas, in milliseconds: a
	// non-negative integer, default 0.
	SettingDelayMS = "delay_ms"
	// SettingFailTrigger makes a run fail with an upstream_error right after
	// its first delta when the last user message (completion: the prompts
	// joined by "\n") equals this value exactly. Unset or empty disables it.
	SettingFailTrigger = "fail_trigger"
	// SettingReasoning is text a chat run "thinks" before it answers: its
	// words go out as reasoning (adapter.Reasoning), split and paced like
	// the echo, before the first answer delta. They count as completion
	// tokens and against max_tokens, as a reasoning model's do. Unset or
	// blank disables it; completion runs never reason.
	SettingReasoning = "reasoning"
)

// ErrInvalidConfig is wrapped by every configuration error New returns.
var ErrInvalidConfig = errors.New("mock: invalid config")

// config is the validated, immutable view of an AdapterConfig.
type config struct {
	delay       time.Duration
	failTrigger string
	reasoning   []string // the words of SettingReasoning
}

// parseConfig validates cfg and reports every problem at once, so an
// operator fixes a config in one round instead of one error at a time.
func parseConfig(cfg *iop.AdapterConfig, log *zap.Logger) (config, error) {
	if cfg == nil {
		return config{}, fmt.Errorf("%w: nil adapter config", ErrInvalidConfig)
	}
	var problems []error
	if t := cfg.GetType(); t != "" && t != TypeName {
		problems = append(problems, fmt.Errorf("type %q is not %q", t, TypeName))
	}
	var c config
	settings := cfg.GetSettings()
	if v, ok := settings[SettingDelayMS]; ok {
		ms, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil:
			problems = append(problems, fmt.Errorf("%s: %q is not an integer", SettingDelayMS, v))
		case ms < 0:
			problems = append(problems, fmt.Errorf("%s: %d is negative", SettingDelayMS, ms))
		case ms > int64(time.Hour/time.Millisecond):
			// Guards against a unit mistake (seconds vs. ns) freezing runs.
			problems = append(problems, fmt.Errorf("%s: %d exceeds one hour", SettingDelayMS, ms))
		default:
			c.delay = time.Duration(ms) * time.Millisecond
		}
	}
	c.failTrigger = settings[SettingFailTrigger]
	c.reasoning = strings.Fields(settings[SettingReasoning])
	if len(problems) > 0 {
		return config{}, fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(problems...))
	}
	// Unknown keys are tolerated (the Edge may forward generic provider keys)
	// but named, so a typo such as "delay" is visible. Values are not logged.
	var unknown []string
	for k := range settings {
		if k != SettingDelayMS && k != SettingFailTrigger && k != SettingReasoning {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		log.Warn("mock: ignoring unknown settings", zap.Strings("keys", unknown))
	}
	return c, nil
}
