package ollama

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// TypeName is the AdapterConfig.type this package serves.
const TypeName = "ollama"

// DefaultBaseURL is used when AdapterConfig.base_url is empty: where a stock
// Ollama listens.
const DefaultBaseURL = "http://127.0.0.1:11434"

// Settings keys (AdapterConfig.settings) the adapter understands.
const (
	// SettingKeepAlive is sent as Ollama's "keep_alive" on every request: a
	// Go-style duration ("5m", "-1s") or a number of seconds ("300", "-1").
	SettingKeepAlive = "keep_alive"
	// SettingOptions is a JSON object of Ollama model options (num_ctx,
	// top_k, ...) used as defaults; values the request maps (temperature,
	// num_predict, ...) override them.
	SettingOptions = "options"
)

// ErrInvalidConfig is wrapped by every configuration error New and
// Reconfigure return.
var ErrInvalidConfig = errors.New("ollama: invalid config")

// config is the validated, immutable view of an AdapterConfig. A new one is
// swapped in whole on Reconfigure, so a run sees one consistent version.
type config struct {
	baseURL   string // scheme://host[:port][/prefix], no trailing slash
	headers   http.Header
	apiKey    string // from api_key_env; sent as a bearer token, never logged
	timeout   time.Duration
	keepAlive json.RawMessage
	options   map[string]json.RawMessage
	toolMode  iop.ToolMode // never UNSPECIFIED: that reads as auto
	// toolGen is the tool-support cache generation this config was
	// installed with (texttools.go): answers are stored only under it.
	toolGen uint64
}

// parseConfig validates cfg and reports every problem at once.
func parseConfig(cfg *iop.AdapterConfig, getenv func(string) string, log *zap.Logger) (*config, error) {
	if cfg == nil {
		return nil, fmt.Errorf("%w: nil adapter config", ErrInvalidConfig)
	}
	var problems []error
	add := func(err error) { problems = append(problems, err) }

	if t := cfg.GetType(); t != "" && t != TypeName {
		add(fmt.Errorf("type %q is not %q", t, TypeName))
	}
	c := &config{headers: make(http.Header)}

	base, err := normalizeBaseURL(cfg.GetBaseUrl())
	if err != nil {
		add(err)
	}
	c.baseURL = base

	if t := cfg.GetTimeoutSec(); t < 0 {
		add(fmt.Errorf("timeout_sec: %d is negative", t))
	} else {
		c.timeout = time.Duration(t) * time.Second
	}

	for name, value := range cfg.GetHeaders() {
		if !validHeaderName(name) {
			add(fmt.Errorf("headers: %q is not a valid header name", name))
			continue
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			add(fmt.Errorf("headers: value of %q contains a control character", name))
			continue
		}
		c.headers.Set(name, value)
	}

	switch c.toolMode = cfg.GetToolMode(); c.toolMode {
	case iop.ToolMode_TOOL_MODE_UNSPECIFIED:
		c.toolMode = iop.ToolMode_TOOL_MODE_AUTO
	case iop.ToolMode_TOOL_MODE_AUTO, iop.ToolMode_TOOL_MODE_NATIVE, iop.ToolMode_TOOL_MODE_TEXT:
	default:
		add(fmt.Errorf("tool_mode %s is not auto, native or text", cfg.GetToolMode()))
	}

	if env := cfg.GetApiKeyEnv(); env != "" {
		c.apiKey = getenv(env)
		if c.apiKey == "" {
			add(fmt.Errorf("api_key_env: environment variable %q is empty or unset", env))
		}
	}

	settings := cfg.GetSettings()
	if v, ok := settings[SettingKeepAlive]; ok {
		ka, err := parseKeepAlive(v)
		if err != nil {
			add(err)
		}
		c.keepAlive = ka
	}
	if v, ok := settings[SettingOptions]; ok {
		if err := json.Unmarshal([]byte(v), &c.options); err != nil || c.options == nil {
			add(fmt.Errorf("%s: must be a JSON object", SettingOptions))
		}
	}

	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(problems...))
	}
	warnUnknownSettings(settings, log)
	return c, nil
}

// normalizeBaseURL accepts Ollama's root URL. A trailing slash is dropped,
// and so is a trailing "/v1": operators often paste the OpenAI-compatible
// URL, but this adapter speaks the native /api/* endpoints under the root.
func normalizeBaseURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		raw = DefaultBaseURL
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("base_url: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("base_url: scheme must be http or https")
	case u.Host == "":
		return "", fmt.Errorf("base_url: missing host")
	case u.User != nil:
		// Credentials would travel in config over the wire and show in
		// logs; api_key_env is the supported way to authenticate.
		return "", fmt.Errorf("base_url: must not contain credentials (use api_key_env)")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#"):
		// Even an empty one: every request's URL is this followed by its
		// path, which a "?" or "#" left at the end would swallow.
		return "", fmt.Errorf("base_url: must not contain a query or fragment")
	}
	// Trimmed as written, so that an escaped character stays escaped in
	// every request's URL.
	path := strings.TrimRight(u.EscapedPath(), "/")
	path = strings.TrimSuffix(path, "/v1")
	return u.Scheme + "://" + u.Host + strings.TrimRight(path, "/"), nil
}

// parseKeepAlive turns the setting into the JSON Ollama expects: a number
// of seconds stays a number, anything else must be a Go duration string.
func parseKeepAlive(v string) (json.RawMessage, error) {
	v = strings.TrimSpace(v)
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return json.RawMessage(strconv.FormatInt(n, 10)), nil
	}
	if _, err := time.ParseDuration(v); err != nil {
		return nil, fmt.Errorf("%s: %q is neither seconds nor a duration", SettingKeepAlive, v)
	}
	b, _ := json.Marshal(v)
	return b, nil
}

func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// warnUnknownSettings names keys the adapter ignores so typos are visible;
// values are never logged.
func warnUnknownSettings(settings map[string]string, log *zap.Logger) {
	var unknown []string
	for k := range settings {
		if k != SettingKeepAlive && k != SettingOptions {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		log.Warn("ollama: ignoring unknown settings", zap.Strings("keys", unknown))
	}
}

// defaultOptions returns a fresh copy of the configured default options, so
// a request can overlay its own values without touching the shared config.
func (c *config) defaultOptions() map[string]any {
	opts := make(map[string]any, len(c.options)+8)
	for k, v := range c.options {
		opts[k] = json.RawMessage(bytes.Clone(v))
	}
	return opts
}
