package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/iop-gateway/iop/dispatch/route"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Edge is the iop-edge configuration (CONTRACT §3).
type Edge struct {
	Listen  EdgeListen  `mapstructure:"listen"`
	Auth    EdgeAuth    `mapstructure:"auth"`
	Limits  EdgeLimits  `mapstructure:"limits"`
	Log     Log         `mapstructure:"log"`
	Tracing Tracing     `mapstructure:"tracing"`
	Runtime Runtime     `mapstructure:"runtime"`
	Cluster Cluster     `mapstructure:"cluster"`
	CORS    EdgeCORS    `mapstructure:"cors"`
	Nodes   []NodeSpec  `mapstructure:"nodes"`
	Models  []ModelSpec `mapstructure:"models"`
}

// Cluster configures several edges sharing capacity.
type Cluster struct {
	Redis ClusterRedis `mapstructure:"redis"`
}

// ClusterRedis is the Redis the edges share leases through. No address:
// leases are counted in this edge only.
type ClusterRedis struct {
	// Address is host:port.
	Address string `mapstructure:"address"`
	// PasswordEnv names an environment variable holding Redis's password
	// (AUTH); empty means none.
	PasswordEnv string `mapstructure:"password_env"`
	// DB is the Redis database number.
	DB int `mapstructure:"db"`
	// LeaseTTLSec: a lease an edge stops renewing (the edge crashed or
	// lost Redis) frees its slot after this long. Default 15.
	LeaseTTLSec float64 `mapstructure:"lease_ttl_sec"`
	// TimeoutMS bounds each Redis call. Default 200.
	TimeoutMS int `mapstructure:"timeout_ms"`
	// KeyPrefix begins every key and pub/sub channel the edges share
	// (<prefix>:lease:…, <prefix>:freed), so that two deployments can
	// share one Redis (pub/sub ignores db). Default "iop"; at most
	// MaxRedisKeyPrefix bytes, no ':', whitespace or control character.
	KeyPrefix string `mapstructure:"key_prefix"`
	// Password is resolved from PasswordEnv; never in a file.
	Password string `mapstructure:"-"`
}

// keysSet names the keys other than address given a value, in the
// order of the struct.
func (r *ClusterRedis) keysSet() []string {
	var set []string
	for _, k := range []struct {
		name string
		set  bool
	}{
		{"cluster.redis.password_env", r.PasswordEnv != ""},
		{"cluster.redis.db", r.DB != 0},
		{"cluster.redis.lease_ttl_sec", r.LeaseTTLSec != 0},
		{"cluster.redis.timeout_ms", r.TimeoutMS != 0},
		{"cluster.redis.key_prefix", r.KeyPrefix != ""},
	} {
		if k.set {
			set = append(set, k.name)
		}
	}
	return set
}

// Bounds on the names the edge keys its state by, in bytes. A node id and
// a provider name are joined, escaped (up to three bytes each), into the
// ledger key of every lease and every shared Responses id's owner, which
// the edges read back only up to 1,024 bytes (cluster.MaxResponseOwnerBytes):
// 128 each keeps that key, under the longest prefix, well inside it. They
// also label every metric series and /admin/status entry. A model name
// labels the queue metrics and the cluster's wait keys; 256 holds the
// longest hub-style names ("org/model-variant-...") with room to spare.
const (
	MaxNodeIDBytes       = 128
	MaxProviderNameBytes = 128
	MaxModelNameBytes    = 256
)

// checkName says what is wrong with a configured name (a node id, a
// provider or model name) of at most maxBytes, or "". Control characters
// (a newline, a NUL) would make log lines, metric labels and redis-cli's
// keys ambiguous; space at either end is almost always a quoting slip, and
// would make a name that looks like another's but does not match it.
func checkName(name string, maxBytes int) string {
	if len(name) > maxBytes {
		return fmt.Sprintf("is %d bytes long, more than %d", len(name), maxBytes)
	}
	if !utf8.ValidString(name) {
		return "is not valid UTF-8"
	}
	for _, c := range name {
		if unicode.IsControl(c) {
			return fmt.Sprintf("must not contain control characters (%U)", c)
		}
	}
	if strings.TrimSpace(name) != name {
		return "must not begin or end with whitespace"
	}
	return ""
}

// MaxRedisKeyPrefix bounds cluster.redis.key_prefix, in bytes: it is
// repeated in every key and every return announcement.
const MaxRedisKeyPrefix = 64

// checkKeyPrefix says what is wrong with a cluster.redis.key_prefix, or
// "". The edges add the ':' after it; one inside it would let one
// deployment's key spell another's (prefix "a:lease" against node names
// beginning "lease:" under prefix "a"). Whitespace and control characters
// would make keys that redis-cli and logs show ambiguously.
func checkKeyPrefix(p string) string {
	if len(p) > MaxRedisKeyPrefix {
		return fmt.Sprintf("is %d bytes long, more than %d", len(p), MaxRedisKeyPrefix)
	}
	if !utf8.ValidString(p) {
		return "is not valid UTF-8"
	}
	for _, c := range p {
		switch {
		case c == ':':
			return "must not contain ':' (the edges add it after the prefix)"
		case unicode.IsSpace(c) || !unicode.IsPrint(c): // !IsPrint: controls too
			return fmt.Sprintf("must not contain whitespace or control characters (%U)", c)
		}
	}
	return ""
}

// LeaseTTL is lease_ttl_sec as a duration.
func (r *ClusterRedis) LeaseTTL() time.Duration {
	return time.Duration(r.LeaseTTLSec * float64(time.Second))
}

// EdgeListen holds the listen addresses.
type EdgeListen struct {
	// HTTP serves the OpenAI surface, /metrics, /healthz, /readyz, /admin.
	HTTP string `mapstructure:"http"`
	// Node is the node wire listener.
	Node string `mapstructure:"node"`
	// TLS applies to the node wire only. Both files empty means plain TCP.
	TLS ServerTLS `mapstructure:"tls"`
	// MaxPendingHandshakes bounds node connections that have not yet been
	// accepted (TLS, preface, registration); a connection beyond it is
	// closed at once. Default 64.
	MaxPendingHandshakes int `mapstructure:"max_pending_handshakes"`
	// MaxNodeConns bounds open node-wire connections of any state. Default
	// 1024; negative means no cap.
	MaxNodeConns int `mapstructure:"max_node_conns"`
	// MaxHTTPConns bounds open client connections on the HTTP listener; a
	// connection beyond it waits in the kernel's backlog until one closes.
	// Default 16384; negative means no cap.
	MaxHTTPConns int `mapstructure:"max_http_conns"`
}

// ServerTLS configures TLS on the node listener.
type ServerTLS struct {
	CertFile string `mapstructure:"cert_file"`
	KeyFile  string `mapstructure:"key_file"`
	// ClientCAFile, when set, requires Nodes to present a certificate signed
	// by it (mutual TLS).
	ClientCAFile string `mapstructure:"client_ca_file"`
}

// Enabled reports whether TLS is configured.
func (t ServerTLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// EdgeAuth holds HTTP credentials. Empty lists/values disable the check.
type EdgeAuth struct {
	// APIKeys: non-empty means /v1/* needs "Authorization: Bearer <key>".
	APIKeys []string `mapstructure:"api_keys"`
	// KeyPriorities gives some API keys a queue priority other than 0
	// (dispatch.Request.Priority): their requests wait ahead of (or, below
	// 0, behind) others. A request's X-IOP-Priority header may lower its
	// key's priority, never raise it.
	KeyPriorities []KeyPriority `mapstructure:"key_priorities"`
	// AdminToken: non-empty means /admin/* needs "Authorization: Bearer <token>".
	AdminToken string `mapstructure:"admin_token"`
}

// KeyPriority is the queue priority of one API key.
type KeyPriority struct {
	// Key is one of auth.api_keys.
	Key string `mapstructure:"key"`
	// Priority is between MinPriority and MaxPriority.
	Priority int `mapstructure:"priority"`
}

// Queue priorities a key or a request may have.
const (
	MinPriority = -10
	MaxPriority = 10
)

// EdgeLimits bounds HTTP requests.
type EdgeLimits struct {
	// MaxBodyBytes bounds request bodies (413 beyond). Default 8 MiB.
	MaxBodyBytes int64 `mapstructure:"max_body_bytes"`
	// WriteTimeoutSec: a client that accepts no bytes of a response for this
	// long is cancelled (cancel reason write_error). Default 30.
	WriteTimeoutSec int `mapstructure:"write_timeout_sec"`
	// ResponseTimeoutSec bounds the wait for a provider's first byte (cancel
	// reason timeout). Default 300; 0 after defaults is impossible.
	ResponseTimeoutSec int `mapstructure:"response_timeout_sec"`
	// StreamIdleTimeoutSec ends a response that started and then sent
	// nothing for this long: an error event, the upstream cancelled. Unset
	// means 300; 0 means no bound.
	StreamIdleTimeoutSec *int `mapstructure:"stream_idle_timeout_sec"`
	// ReadHeaderTimeoutSec bounds reading a request's headers. Default 10.
	ReadHeaderTimeoutSec int `mapstructure:"read_header_timeout_sec"`
	// ReadTimeoutSec bounds reading a whole request, headers and body
	// (an 8 MiB prompt at 100 KB/s takes 80 s). Default 120.
	ReadTimeoutSec int `mapstructure:"read_timeout_sec"`
	// IdleTimeoutSec closes a keep-alive connection idle this long.
	// Default 120.
	IdleTimeoutSec int `mapstructure:"idle_timeout_sec"`
}

// MaxWireBodyBytes is the largest request body the node wire carries: one
// frame is at most 16 MiB (nodewire.DefaultMaxFrameSize) and 1 MiB of it is
// kept for headers and metadata. limits.max_body_bytes may not exceed it.
const MaxWireBodyBytes = 15 << 20

// DefaultStreamIdleTimeoutSec is limits.stream_idle_timeout_sec when unset.
const DefaultStreamIdleTimeoutSec = 300

// StreamIdleTimeout is limits.stream_idle_timeout_sec as a duration; zero
// means no bound.
func (l *EdgeLimits) StreamIdleTimeout() time.Duration {
	if l.StreamIdleTimeoutSec == nil {
		return DefaultStreamIdleTimeoutSec * time.Second
	}
	return time.Duration(*l.StreamIdleTimeoutSec) * time.Second
}

// Log configures logging.
type Log struct {
	// Level: debug | info | warn | error. Default info.
	Level string `mapstructure:"level"`
	// Format: json | console. Default json.
	Format string `mapstructure:"format"`
	// unmatchedEnv are the IOP_* variables set at load that override no
	// key; the logger warns of them once built (Build), its first lines.
	// Nil when there are none, so that a reload's comparison of this
	// section with the running one sees no change.
	unmatchedEnv []string
}

// NodeSpec is one Node the Edge accepts.
type NodeSpec struct {
	ID string `mapstructure:"id"`
	// Token is the node credential; or TokenEnv names a variable holding it.
	Token    string `mapstructure:"token"`
	TokenEnv string `mapstructure:"token_env"`
	// Heartbeat interval and timeout, seconds. Defaults 5 and 15; the
	// timeout must exceed the interval.
	HeartbeatIntervalSec float64 `mapstructure:"heartbeat_interval_sec"`
	HeartbeatTimeoutSec  float64 `mapstructure:"heartbeat_timeout_sec"`
	// LoadReportIntervalSec is how often the node sends its backends' load
	// (LoadReport) for load-aware routing. Unset means 2; 0 means none
	// (the edge then polls health every 5 s); at least 0.2 otherwise.
	LoadReportIntervalSec *float64       `mapstructure:"load_report_interval_sec"`
	Providers             []ProviderSpec `mapstructure:"providers"`
}

// Adapter type names the edge reads as well as the node (ProviderSpec.Type;
// the node's adapters register under these names): a Messages call with
// thinking off tells the first two servers through chat_template_kwargs,
// and all three follow a response_format at the cost of tool calls.
const (
	ProviderTypeVLLM     = "vllm"
	ProviderTypeLlamaCpp = "llamacpp"
	ProviderTypeOllama   = "ollama"
)

// ProviderSpec is one adapter instance on a Node (NodeConfigPayload.adapters).
type ProviderSpec struct {
	// Name is the AdapterConfig.name and the provider_id.
	Name string `mapstructure:"name"`
	// Type: openai_compat | vllm | llamacpp | ollama | cli | mock.
	Type string `mapstructure:"type"`
	// Category: api | cli | local_inference. Empty means the one its
	// adapter declares (AdapterCapabilities.category), and before the node
	// has declared it, the one its type is known to have.
	Category  string `mapstructure:"category"`
	BaseURL   string `mapstructure:"base_url"`
	APIKeyEnv string `mapstructure:"api_key_env"`
	// Capacity is the number of concurrent leases. Default 1.
	Capacity int `mapstructure:"capacity"`
	// LongCapacity bounds how many of those may be long requests. 0 means
	// no separate limit (equal to Capacity).
	LongCapacity int `mapstructure:"long_capacity"`
	// TimeoutSec bounds one upstream request. 0 means none.
	TimeoutSec int `mapstructure:"timeout_sec"`
	// ToolMode (openai_compat, vllm, ollama): auto | native | text.
	// Default auto: native tools, and the text tool-call form for a backend
	// or model that cannot take them (a refusal; for ollama also the
	// model's capabilities). Other types ignore it.
	ToolMode string `mapstructure:"tool_mode"`
	// Command (cli): the argv; the prompt goes to stdin.
	Command []string          `mapstructure:"command"`
	Headers map[string]string `mapstructure:"headers"`
	// Extra holds any further adapter-specific keys.
	Extra map[string]any `mapstructure:",remain"`
}

// Settings renders Extra as the wire's string map: scalars as text, other
// values JSON-encoded. Keys are sorted by the map encoder, so the result is
// deterministic.
func (p ProviderSpec) Settings() map[string]string {
	if len(p.Extra) == 0 {
		return nil
	}
	out := make(map[string]string, len(p.Extra))
	for k, v := range p.Extra {
		switch x := v.(type) {
		case string:
			out[k] = x
		case bool:
			out[k] = strconv.FormatBool(x)
		case int:
			out[k] = strconv.Itoa(x)
		case float64:
			out[k] = strconv.FormatFloat(x, 'f', -1, 64)
		default:
			b, err := json.Marshal(x)
			if err != nil {
				b = []byte(fmt.Sprint(x))
			}
			out[k] = string(b)
		}
	}
	return out
}

// ModelSpec is one external model and its provider candidates.
type ModelSpec struct {
	// Name is the external OpenAI `model`.
	Name string `mapstructure:"name"`
	// LongContextTokens: estimated prompt tokens at or above this make a
	// request long. 0 means no request is long.
	LongContextTokens int `mapstructure:"long_context_tokens"`
	// QueueTimeoutSec is the longest wait for a lease. Default 30.
	QueueTimeoutSec float64 `mapstructure:"queue_timeout_sec"`
	// MaxQueue bounds pending requests (429 beyond). Default 256; a negative
	// value means no queueing at all (0 after defaults is impossible).
	MaxQueue int `mapstructure:"max_queue"`
	// OfflineGraceSec: a request for a model none of whose candidates has
	// been live within this many seconds fails at once with 503
	// no_provider_available instead of queueing. Unset means 10; 0 means
	// always queue (up to queue_timeout_sec).
	OfflineGraceSec *float64 `mapstructure:"offline_grace_sec"`
	// Routing picks among the candidates with room (dispatch/route):
	// ordered (the first in the listed order), least_load (lease
	// occupancy, backend queue depth and KV-cache pressure) or
	// prefix_affinity (the candidate that last served the longest prefix
	// of the request, unless that is clearly busier; else least_load).
	// Unset means least_load, which without backend load reports is the
	// lease occupancy alone: how iop has always spread requests.
	Routing string `mapstructure:"routing"`
	// MaxAttempts bounds how many candidates one request may be tried on:
	// a request whose provider fails before the first byte reached the
	// client (node lost, backend unreachable, 502/503/504, node at
	// capacity) is tried again on another candidate with room, never after
	// the first byte and never for a 4xx. Unset means 2; 1 disables
	// failover.
	MaxAttempts int `mapstructure:"max_attempts"`
	// Workspace (cli routes): sub-directory of the node's workspace_root.
	Workspace string          `mapstructure:"workspace"`
	Providers []ModelProvider `mapstructure:"providers"`
}

// models[].max_attempts: the default, and the most a config may ask (each
// attempt may wait a response timeout).
const (
	DefaultMaxAttempts = 2
	MaxMaxAttempts     = 8
)

// DefaultLoadReportIntervalSec is nodes[].load_report_interval_sec when
// unset.
const DefaultLoadReportIntervalSec = 2.0

// LoadReportInterval is load_report_interval_sec as a duration; zero means
// no reports.
func (n *NodeSpec) LoadReportInterval() time.Duration {
	if n == nil || n.LoadReportIntervalSec == nil {
		return 0
	}
	return time.Duration(*n.LoadReportIntervalSec * float64(time.Second))
}

// DefaultOfflineGraceSec is models[].offline_grace_sec when unset.
const DefaultOfflineGraceSec = 10

// OfflineGrace is offline_grace_sec as a duration; zero means no fast path.
func (m *ModelSpec) OfflineGrace() time.Duration {
	if m.OfflineGraceSec == nil {
		return DefaultOfflineGraceSec * time.Second
	}
	return time.Duration(*m.OfflineGraceSec * float64(time.Second))
}

// ModelProvider is one candidate of a model group, in preference order.
type ModelProvider struct {
	Node     string `mapstructure:"node"`
	Provider string `mapstructure:"provider"`
	// Target is the upstream model id (RunRequest.target).
	Target string `mapstructure:"target"`
}

// Categories are the resource kinds a provider may be given. Provider
// types are not listed here: a node is the authority on the adapter types
// it runs (it refuses an unknown one, naming it), so adding an adapter
// needs no edge change.
var (
	Categories = []string{"api", "cli", "local_inference"}
	ToolModes  = []string{"auto", "native", "text"}
)

// typeName is what a provider type looks like: a lowercase identifier.
var typeName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// toolModes is the one mapping of tool_mode names to the wire's enum.
var toolModes = map[string]iop.ToolMode{
	"auto":   iop.ToolMode_TOOL_MODE_AUTO,
	"native": iop.ToolMode_TOOL_MODE_NATIVE,
	"text":   iop.ToolMode_TOOL_MODE_TEXT,
}

// WireToolMode is the provider's tool_mode as the wire's enum (auto when
// unset).
func (p *ProviderSpec) WireToolMode() iop.ToolMode {
	if m, ok := toolModes[p.ToolMode]; ok {
		return m
	}
	return iop.ToolMode_TOOL_MODE_AUTO
}

// LoadEdge reads, defaults and validates an edge config file.
func LoadEdge(file string) (*Edge, error) { return loadNormalized[Edge](file) }

// Normalize applies defaults, resolves token_env and validates everything,
// returning a *ProblemsError listing every problem.
func (c *Edge) Normalize() error {
	var p problems
	if c.Listen.HTTP == "" {
		c.Listen.HTTP = "127.0.0.1:8080"
	}
	if c.Listen.Node == "" {
		c.Listen.Node = "127.0.0.1:7070"
	}
	checkHostPort(&p, "listen.http", c.Listen.HTTP, listenAddr)
	checkHostPort(&p, "listen.node", c.Listen.Node, listenAddr)
	if sameListenSocket(c.Listen.HTTP, c.Listen.Node) {
		// The second bind would fail at start with "address already in
		// use", pointing at some other process.
		if c.Listen.HTTP == c.Listen.Node {
			p.add("listen.http and listen.node are both %s; they need different addresses", quoteSafe(c.Listen.HTTP))
		} else {
			p.add("listen.http %s and listen.node %s are one address; they need different addresses", quoteSafe(c.Listen.HTTP), quoteSafe(c.Listen.Node))
		}
	} else if wild, ok := listenOverlap(c.Listen.HTTP, c.Listen.Node); ok {
		p.add("listen.http %s and listen.node %s share a port, and %s listens on every address of this machine; they need different ports", quoteSafe(c.Listen.HTTP), quoteSafe(c.Listen.Node), quoteSafe(wild))
	}
	if t := c.Listen.TLS; t.Enabled() && (t.CertFile == "" || t.KeyFile == "") {
		p.add("listen.tls: cert_file and key_file must be set together")
	}
	if t := c.Listen.TLS; !t.Enabled() && t.ClientCAFile != "" {
		p.add("listen.tls.client_ca_file needs cert_file and key_file")
	}
	// Keys are compared trimmed (a list in IOP_AUTH_API_KEYS is written
	// "k1, k2"): trimmed here too, a priority named "k2" finds its key, " k1"
	// repeats "k1" and a key of spaces is empty, so refused. (admin_token
	// is left as written: trimmed to empty it would open /admin/*.)
	for i := range c.Auth.APIKeys {
		c.Auth.APIKeys[i] = strings.TrimSpace(c.Auth.APIKeys[i])
	}
	for i := range c.Auth.KeyPriorities {
		c.Auth.KeyPriorities[i].Key = strings.TrimSpace(c.Auth.KeyPriorities[i].Key)
	}
	for i, k := range c.Auth.APIKeys {
		if k == "" {
			p.add("auth.api_keys[%d] is empty", i)
		} else if j := slices.Index(c.Auth.APIKeys, k); j < i {
			// Most often a key meant to replace another (a rotation):
			// the one it was to replace is still valid. Indexes only,
			// never the key.
			p.add("auth.api_keys[%d] repeats auth.api_keys[%d]", i, j)
		}
	}
	if r := &c.Cluster.Redis; r.Address != "" {
		checkHostPort(&p, "cluster.redis.address", r.Address, dialAddr)
		if r.LeaseTTLSec == 0 {
			r.LeaseTTLSec = 15
		}
		if !(r.LeaseTTLSec >= 1 && r.LeaseTTLSec <= 3600) { // NaN too
			p.add("cluster.redis.lease_ttl_sec must be between 1 and 3600")
		}
		if r.TimeoutMS == 0 {
			r.TimeoutMS = 200
		}
		if r.TimeoutMS < 1 || r.TimeoutMS > 10000 {
			p.add("cluster.redis.timeout_ms must be between 1 and 10000")
		} else if ttlMS := r.LeaseTTLSec * 1000; ttlMS >= 1000 && float64(r.TimeoutMS) > ttlMS/5 {
			// Leases are renewed every TTL/3 by a loop whose round may
			// spend three calls' timeouts: past a fifth of the TTL, a slow
			// but answering Redis would let live leases expire, and other
			// edges take slots still in use.
			p.add("cluster.redis.timeout_ms (%d) must be at most a fifth of lease_ttl_sec (%g ms): renewals would arrive after leases expire", r.TimeoutMS, ttlMS/5)
		}
		if r.DB < 0 {
			p.add("cluster.redis.db must not be negative")
		}
		if r.KeyPrefix == "" {
			r.KeyPrefix = "iop"
		}
		if msg := checkKeyPrefix(r.KeyPrefix); msg != "" {
			p.add("cluster.redis.key_prefix %s", msg)
		}
		if r.PasswordEnv != "" {
			r.Password = resolveSecret(&p, "cluster.redis.password", "", r.PasswordEnv)
		}
	} else if set := r.keysSet(); len(set) > 0 {
		// Without an address the edge counts leases alone: an operator who
		// set how to reach Redis but not where believes edges share
		// capacity that each would hand out in full.
		p.add("%s given without cluster.redis.address: this edge would count its leases alone", strings.Join(set, ", "))
	}
	for i, kp := range c.Auth.KeyPriorities {
		if !slices.Contains(c.Auth.APIKeys, kp.Key) {
			p.add("auth.key_priorities[%d].key is not one of auth.api_keys", i)
		} else if j := slices.IndexFunc(c.Auth.KeyPriorities, func(o KeyPriority) bool { return o.Key == kp.Key }); j < i {
			// Two priorities for one key: which applies would be an
			// accident of the order.
			p.add("auth.key_priorities[%d].key repeats auth.key_priorities[%d].key", i, j)
		}
		if kp.Priority < MinPriority || kp.Priority > MaxPriority {
			p.add("auth.key_priorities[%d].priority must be between %d and %d", i, MinPriority, MaxPriority)
		}
	}
	if c.Limits.MaxBodyBytes == 0 {
		c.Limits.MaxBodyBytes = 8 << 20
	}
	if c.Limits.MaxBodyBytes < 0 {
		p.add("limits.max_body_bytes must be positive")
	}
	if c.Limits.MaxBodyBytes > MaxWireBodyBytes {
		p.add("limits.max_body_bytes %d exceeds what the node wire carries (%d bytes)", c.Limits.MaxBodyBytes, MaxWireBodyBytes)
	}
	if c.Listen.MaxPendingHandshakes == 0 {
		c.Listen.MaxPendingHandshakes = 64
	}
	if c.Listen.MaxPendingHandshakes < 0 {
		p.add("listen.max_pending_handshakes must be positive")
	}
	if c.Listen.MaxNodeConns == 0 {
		c.Listen.MaxNodeConns = 1024
	}
	if c.Listen.MaxHTTPConns == 0 {
		c.Listen.MaxHTTPConns = 16384
	}
	if c.Limits.StreamIdleTimeoutSec == nil {
		v := DefaultStreamIdleTimeoutSec
		c.Limits.StreamIdleTimeoutSec = &v
	} else if *c.Limits.StreamIdleTimeoutSec < 0 {
		p.add("limits.stream_idle_timeout_sec must not be negative (0 means no bound)")
	} else {
		checkMaxSeconds(&p, "limits.stream_idle_timeout_sec", float64(*c.Limits.StreamIdleTimeoutSec))
	}
	defaultPositive(&p, "limits.read_header_timeout_sec", &c.Limits.ReadHeaderTimeoutSec, 10)
	defaultPositive(&p, "limits.read_timeout_sec", &c.Limits.ReadTimeoutSec, 120)
	defaultPositive(&p, "limits.idle_timeout_sec", &c.Limits.IdleTimeoutSec, 120)
	if c.Limits.WriteTimeoutSec == 0 {
		c.Limits.WriteTimeoutSec = 30
	}
	if c.Limits.WriteTimeoutSec < 0 {
		p.add("limits.write_timeout_sec must be positive")
	}
	checkMaxSeconds(&p, "limits.write_timeout_sec", float64(c.Limits.WriteTimeoutSec))
	if c.Limits.ResponseTimeoutSec == 0 {
		c.Limits.ResponseTimeoutSec = 300
	}
	if c.Limits.ResponseTimeoutSec < 0 {
		p.add("limits.response_timeout_sec must be positive")
	}
	checkMaxSeconds(&p, "limits.response_timeout_sec", float64(c.Limits.ResponseTimeoutSec))
	c.CORS.normalize(&p)
	c.Log.normalize(&p)
	c.Tracing.normalize(&p)
	c.Runtime.normalize(&p)

	providers := map[[2]string]*ProviderSpec{}
	nodeIDs := map[string]bool{}
	for i := range c.Nodes {
		n := &c.Nodes[i]
		where := fmt.Sprintf("nodes[%d]", i)
		if n.ID == "" {
			p.add("%s.id is required", where)
		} else if bad := checkName(n.ID, MaxNodeIDBytes); bad != "" {
			p.add("%s.id %s", where, bad)
		} else if nodeIDs[n.ID] {
			p.add("%s.id %q is duplicated", where, n.ID)
		}
		nodeIDs[n.ID] = true
		n.Token = resolveSecret(&p, where+".token", n.Token, n.TokenEnv)
		if n.Token == "" && n.TokenEnv == "" {
			p.add("%s.token (or token_env) is required", where)
		}
		if n.HeartbeatIntervalSec == 0 {
			n.HeartbeatIntervalSec = 5
		}
		if n.HeartbeatTimeoutSec == 0 {
			n.HeartbeatTimeoutSec = 3 * n.HeartbeatIntervalSec
		}
		if !(n.HeartbeatIntervalSec >= MinHeartbeatIntervalSec) && !math.IsNaN(n.HeartbeatIntervalSec) {
			// Below it the wire's milliseconds round to 0, which the
			// node reads as its 5 s default, or each node sends
			// hundreds of heartbeats a second.
			p.add("%s.heartbeat_interval_sec must be at least %g", where, MinHeartbeatIntervalSec)
		}
		checkMaxSeconds(&p, where+".heartbeat_interval_sec", n.HeartbeatIntervalSec)
		if !(n.HeartbeatTimeoutSec > n.HeartbeatIntervalSec) { // NaN too
			p.add("%s.heartbeat_timeout_sec must exceed heartbeat_interval_sec", where)
		}
		checkMaxSeconds(&p, where+".heartbeat_timeout_sec", n.HeartbeatTimeoutSec)
		if n.LoadReportIntervalSec == nil {
			v := DefaultLoadReportIntervalSec
			n.LoadReportIntervalSec = &v
		} else if v := *n.LoadReportIntervalSec; v != 0 && !(v >= 0.2 && v <= 3600) { // NaN too
			p.add("%s.load_report_interval_sec must be 0 (none) or between 0.2 and 3600", where)
		}
		names := map[string]bool{}
		for j := range n.Providers {
			pr := &n.Providers[j]
			pw := fmt.Sprintf("%s.providers[%d]", where, j)
			pr.normalize(&p, pw)
			if names[pr.Name] {
				p.add("%s.name %q is duplicated on node %q", pw, pr.Name, n.ID)
			}
			names[pr.Name] = true
			providers[[2]string{n.ID, pr.Name}] = pr
		}
	}
	modelNames := map[string]bool{}
	for i := range c.Models {
		m := &c.Models[i]
		where := fmt.Sprintf("models[%d]", i)
		if m.Name == "" {
			p.add("%s.name is required", where)
		} else if bad := checkName(m.Name, MaxModelNameBytes); bad != "" {
			p.add("%s.name %s", where, bad)
		} else if modelNames[m.Name] {
			p.add("%s.name %q is duplicated", where, m.Name)
		}
		modelNames[m.Name] = true
		if m.LongContextTokens < 0 {
			p.add("%s.long_context_tokens must not be negative", where)
		}
		if m.QueueTimeoutSec == 0 {
			m.QueueTimeoutSec = 30
		}
		if m.QueueTimeoutSec < 0 {
			p.add("%s.queue_timeout_sec must be positive", where)
		}
		checkMaxSeconds(&p, where+".queue_timeout_sec", m.QueueTimeoutSec)
		if m.MaxQueue == 0 {
			m.MaxQueue = 256
		}
		if m.OfflineGraceSec == nil {
			v := float64(DefaultOfflineGraceSec)
			m.OfflineGraceSec = &v
		} else if *m.OfflineGraceSec < 0 {
			p.add("%s.offline_grace_sec must not be negative (0 means always queue)", where)
		} else {
			checkMaxSeconds(&p, where+".offline_grace_sec", *m.OfflineGraceSec)
		}
		if m.MaxAttempts == 0 {
			m.MaxAttempts = DefaultMaxAttempts
		} else if m.MaxAttempts < 0 || m.MaxAttempts > MaxMaxAttempts {
			p.add("%s.max_attempts must be between 1 and %d", where, MaxMaxAttempts)
		}
		if m.Routing == "" {
			m.Routing = route.LeastLoad.String()
		} else if _, err := route.ParseStrategy(m.Routing); err != nil {
			p.add("%s.routing %q is not ordered, least_load or prefix_affinity", where, m.Routing)
		}
		if m.Workspace != "" && !localRelPath(m.Workspace) {
			p.add("%s.workspace %q must be a relative path without ..", where, m.Workspace)
		}
		if len(m.Providers) == 0 {
			p.add("%s.providers: at least one candidate is required", where)
		}
		seen := map[[2]string]bool{}
		for j, mp := range m.Providers {
			pw := fmt.Sprintf("%s.providers[%d]", where, j)
			key := [2]string{mp.Node, mp.Provider}
			if !nodeIDs[mp.Node] {
				p.add("%s.node %q is not a configured node", pw, mp.Node)
			} else if providers[key] == nil {
				p.add("%s.provider %q is not a provider of node %q", pw, mp.Provider, mp.Node)
			}
			if seen[key] {
				p.add("%s: %s/%s is listed twice", pw, mp.Node, mp.Provider)
			}
			seen[key] = true
			if mp.Target == "" {
				p.add("%s.target is required", pw)
			}
		}
	}
	return p.err("")
}

func (pr *ProviderSpec) normalize(p *problems, where string) {
	if pr.Type == "" {
		p.add("%s.type is required (the adapter type the node runs, e.g. vllm)", where)
	} else if !typeName.MatchString(pr.Type) {
		p.add("%s.type %q is not a lowercase identifier", where, pr.Type)
	}
	if pr.Name == "" {
		pr.Name = pr.Type // AdapterConfig.name: empty means the type name
	} else if bad := checkName(pr.Name, MaxProviderNameBytes); bad != "" {
		p.add("%s.name %s", where, bad)
	}
	if pr.Category != "" && !slices.Contains(Categories, pr.Category) {
		p.add("%s.category %q is not one of %v", where, pr.Category, Categories)
	}
	if pr.Capacity == 0 {
		pr.Capacity = 1
	}
	if pr.Capacity < 0 {
		p.add("%s.capacity must be positive", where)
	}
	if pr.Capacity > MaxCapacity {
		p.add("%s.capacity must be at most %d", where, MaxCapacity)
	}
	if pr.LongCapacity < 0 || pr.LongCapacity > pr.Capacity {
		p.add("%s.long_capacity must be between 0 and capacity (%d)", where, pr.Capacity)
	}
	if pr.LongCapacity == 0 {
		pr.LongCapacity = pr.Capacity
	}
	if pr.TimeoutSec < 0 {
		p.add("%s.timeout_sec must not be negative", where)
	}
	checkMaxSeconds(p, where+".timeout_sec", float64(pr.TimeoutSec))
	// What each adapter type needs beyond this (a base_url, a command) is
	// checked by its factory on the node, which refuses the config naming
	// every problem.
	if pr.BaseURL != "" {
		if u, err := url.Parse(pr.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.add("%s.base_url %s must be an http(s) URL", where, quoteSafe(pr.BaseURL))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(pr.Extra)) {
		if want := nearKey(k); want != "" {
			p.add("%s: unknown key %q; did you mean %s?", where, k, want)
		}
	}
	if pr.ToolMode == "" {
		pr.ToolMode = "auto"
	} else if _, ok := toolModes[pr.ToolMode]; !ok {
		p.add("%s.tool_mode %q is not one of %v", where, pr.ToolMode, ToolModes)
	}
}

func (l *Log) normalize(p *problems) {
	if l.Level == "" {
		l.Level = "info"
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, l.Level) {
		p.add("log.level %q is not one of debug, info, warn, error", l.Level)
	}
	if l.Format == "" {
		l.Format = "json"
	}
	if l.Format != "json" && l.Format != "console" {
		p.add("log.format %q is not json or console", l.Format)
	}
}

// defaultPositive sets *v to def when zero and reports a negative value.
func defaultPositive(p *problems, key string, v *int, def int) {
	if *v == 0 {
		*v = def
	}
	if *v < 0 {
		p.add("%s must be positive", key)
	}
	checkMaxSeconds(p, key, float64(*v))
}

// MaxSeconds bounds every *_sec key (30 days): a longer timeout or
// interval is a typo (keys where "none" makes sense spell it 0), and far
// larger values would overflow time.Duration or the wire's millisecond
// fields into nonsense (negative or tiny durations).
const MaxSeconds = 30 * 24 * 3600

// MinHeartbeatIntervalSec is the shortest nodes[].heartbeat_interval_sec.
const MinHeartbeatIntervalSec = 0.05

// MaxCapacity bounds providers[].capacity: far beyond any backend's
// concurrency, well within the wire's int32.
const MaxCapacity = 1_000_000

// checkMaxSeconds reports a duration key that is not a number (NaN, .inf)
// or exceeds MaxSeconds. Lower bounds are each key's own.
func checkMaxSeconds(p *problems, key string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v > MaxSeconds {
		p.add("%s must be a number of seconds of at most %d (30 days)", key, MaxSeconds)
	}
}

// Whether checkHostPort checks an address to listen on or one to dial.
const (
	listenAddr = false
	dialAddr   = true
)

// Node returns the spec of node id, or nil.
func (c *Edge) Node(id string) *NodeSpec {
	for i := range c.Nodes {
		if c.Nodes[i].ID == id {
			return &c.Nodes[i]
		}
	}
	return nil
}

// ReferencedProviders returns, per node, the provider names some model uses,
// sorted.
func (c *Edge) ReferencedProviders() map[string][]string {
	out := map[string][]string{}
	for _, m := range c.Models {
		for _, mp := range m.Providers {
			if !slices.Contains(out[mp.Node], mp.Provider) {
				out[mp.Node] = append(out[mp.Node], mp.Provider)
			}
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

// Provider returns the spec of the node's provider name, or nil.
func (n *NodeSpec) Provider(name string) *ProviderSpec {
	for i := range n.Providers {
		if n.Providers[i].Name == name {
			return &n.Providers[i]
		}
	}
	return nil
}
