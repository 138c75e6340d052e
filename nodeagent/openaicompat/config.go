package openaicompat

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	iopconfig "github.com/iop-gateway/iop/config"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Adapter type names this package serves.
const (
	TypeOpenAICompat = "openai_compat"
	TypeVLLM         = iopconfig.ProviderTypeVLLM
)

// config is the validated, immutable view of one AdapterConfig. A new value
// replaces the old one atomically on Reconfigure, so a request reads one
// consistent snapshot for its whole life.
type config struct {
	name      string
	base      *url.URL // no trailing slash, no query, no fragment
	baseURL   string   // base as a string, which every request's URL starts with
	timeout   time.Duration
	toolMode  iop.ToolMode // never UNSPECIFIED: that reads as auto
	headers   http.Header  // canonical names
	apiKeyEnv string
}

// parseConfig validates cfg for adapter type kind and reports every problem
// at once, so an operator fixes a config in one round.
func parseConfig(cfg *iop.AdapterConfig, kind string) (*config, error) {
	if cfg == nil {
		return nil, errors.New("openaicompat: config is missing")
	}
	var errs []error
	if t := cfg.GetType(); t != "" && t != kind {
		errs = append(errs, fmt.Errorf("type %q is not %q", t, kind))
	}
	c := &config{
		name:      cfg.GetName(),
		toolMode:  cfg.GetToolMode(),
		apiKeyEnv: strings.TrimSpace(cfg.GetApiKeyEnv()),
		headers:   make(http.Header),
	}
	if c.name == "" {
		c.name = kind
	}
	base, err := parseBaseURL(cfg.GetBaseUrl())
	if err != nil {
		errs = append(errs, err)
	}
	c.base = base
	if base != nil {
		c.baseURL = strings.TrimRight(base.String(), "/")
	}

	if cfg.GetTimeoutSec() < 0 {
		errs = append(errs, fmt.Errorf("timeout_sec %d must not be negative", cfg.GetTimeoutSec()))
	}
	c.timeout = time.Duration(max(cfg.GetTimeoutSec(), 0)) * time.Second

	switch c.toolMode {
	case iop.ToolMode_TOOL_MODE_UNSPECIFIED:
		c.toolMode = iop.ToolMode_TOOL_MODE_AUTO
	case iop.ToolMode_TOOL_MODE_AUTO, iop.ToolMode_TOOL_MODE_NATIVE, iop.ToolMode_TOOL_MODE_TEXT:
	default:
		errs = append(errs, fmt.Errorf("tool_mode %s is not auto, native or text", cfg.GetToolMode()))
	}

	if c.apiKeyEnv != "" && !validEnvName(c.apiKeyEnv) {
		errs = append(errs, fmt.Errorf("api_key_env %q is not a valid environment variable name", c.apiKeyEnv))
	}

	for name, value := range cfg.GetHeaders() {
		if err := checkConfigHeader(name, value); err != nil {
			errs = append(errs, err)
			continue
		}
		c.headers.Set(name, value)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("openaicompat: invalid config for %q: %w", c.name, errors.Join(errs...))
	}
	return c, nil
}

func parseBaseURL(raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, errors.New("base_url is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("base_url: %w", err)
	}
	var errs []error
	if u.Scheme != "http" && u.Scheme != "https" {
		errs = append(errs, fmt.Errorf("base_url scheme %q must be http or https", u.Scheme))
	}
	if u.Host == "" {
		errs = append(errs, errors.New("base_url has no host"))
	}
	if u.User != nil {
		// Credentials in the URL would travel on the wire and show up in
		// logs; the key belongs in api_key_env.
		errs = append(errs, errors.New("base_url must not carry credentials (use api_key_env)"))
	}
	// Every request's URL is base_url followed by its path: a "?" or "#"
	// left at the end, even with nothing after it, would put the path in
	// the query or the fragment.
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#") {
		errs = append(errs, errors.New("base_url must not have a query or fragment"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// The trailing slashes are trimmed from the path as written, so that an
	// escaped slash before them (".../a%2F/") stays escaped: trimmed from the
	// decoded path, it read as one more slash to trim.
	esc := strings.TrimRight(u.EscapedPath(), "/")
	p, err := url.PathUnescape(esc)
	if err != nil {
		return nil, fmt.Errorf("base_url: %w", err)
	}
	u.Path, u.RawPath = p, esc
	return u, nil
}

// checkConfigHeader rejects configured headers that are malformed, that the
// transport owns, or that would carry a secret over the wire.
func checkConfigHeader(name, value string) error {
	if !validHeaderName(name) {
		return fmt.Errorf("headers: %q is not a valid header name", name)
	}
	if strings.ContainsAny(value, "\r\n\x00") {
		return fmt.Errorf("headers: value of %q contains a control character", name)
	}
	canon := http.CanonicalHeaderKey(name)
	switch {
	case canon == "Authorization" || canon == "Proxy-Authorization":
		return fmt.Errorf("headers: %q is not allowed (use api_key_env)", name)
	case isHopByHop(canon), canon == "Host", canon == "Content-Length":
		return fmt.Errorf("headers: %q is managed by the transport", name)
	}
	return nil
}

// resolve joins a tunnel path (relative to base_url, optionally with a query)
// onto the base URL. It refuses anything that could leave base_url: absolute
// URLs, scheme-relative paths and dot segments.
func (c *config) resolve(path string) (*url.URL, error) {
	p, query, hasQuery := strings.Cut(path, "?")
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	if strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\#") {
		return nil, fmt.Errorf("path %q is not relative to base_url", path)
	}
	unescaped, err := url.PathUnescape(p)
	if err != nil {
		return nil, fmt.Errorf("path: %w", err)
	}
	for seg := range strings.SplitSeq(unescaped, "/") {
		if seg == ".." || seg == "." {
			return nil, fmt.Errorf("path %q has a dot segment", path)
		}
	}
	// Appending the escaped form keeps the caller's escaping (e.g. %2F inside
	// a model id) byte for byte.
	raw := c.baseURL + p
	if hasQuery {
		raw += "?" + query
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("path: %w", err)
	}
	if u.Scheme != c.base.Scheme || u.Host != c.base.Host {
		return nil, fmt.Errorf("path %q is not relative to base_url", path)
	}
	return u, nil
}

// endpoint is base_url + a fixed API path.
func (c *config) endpoint(p string) string {
	return c.baseURL + p
}

// root is base_url without a trailing /v1: where vLLM serves /health and
// /metrics.
func (c *config) root() string {
	return strings.TrimRight(strings.TrimSuffix(c.baseURL, "/v1"), "/")
}

// requestTimeout picks the per-request bound: a positive value from the
// request wins over the configured one.
func (c *config) requestTimeout(reqSec uint32) time.Duration {
	if reqSec > 0 {
		return time.Duration(reqSec) * time.Second
	}
	return c.timeout
}

// Hop-by-hop headers (RFC 9110 §7.6.1) plus the legacy ones proxies drop.
var hopByHop = map[string]bool{
	"Connection":          true,
	"Keep-Alive":          true,
	"Proxy-Connection":    true,
	"Proxy-Authenticate":  true,
	"Proxy-Authorization": true,
	"Te":                  true,
	"Trailer":             true,
	"Transfer-Encoding":   true,
	"Upgrade":             true,
}

func isHopByHop(canon string) bool {
	return hopByHop[canon] || strings.HasPrefix(canon, "Proxy-")
}

// connectionTokens lists header names a Connection header marks as
// hop-by-hop for this message.
func connectionTokens(values []string) map[string]bool {
	var out map[string]bool
	for _, v := range values {
		for tok := range strings.SplitSeq(v, ",") {
			if tok = strings.TrimSpace(tok); tok != "" {
				if out == nil {
					out = make(map[string]bool)
				}
				out[http.CanonicalHeaderKey(tok)] = true
			}
		}
	}
	return out
}

// responseHeaders removes the hop-by-hop headers from h (also those its
// Connection header nominates, RFC 9110 §7.6.1) and returns it. h is a
// response's own header map, read for the status frame and then dropped,
// so it is filtered in place: a copy cost a map and a slice per header
// on every request. A name not in canonical form (a hand-built header;
// http.ReadResponse canonicalizes) is moved to its canonical form.
func responseHeaders(h http.Header) http.Header {
	drop := connectionTokens(h.Values("Connection"))
	for k, vs := range h {
		ck := http.CanonicalHeaderKey(k)
		if isHopByHop(ck) || drop[ck] {
			delete(h, k)
			continue
		}
		if ck != k {
			delete(h, k)
			h[ck] = append(h[ck], vs...)
		}
	}
	return h
}

func validEnvName(s string) bool {
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
