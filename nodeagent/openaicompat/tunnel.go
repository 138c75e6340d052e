package openaicompat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

const (
	// tunnelReadSize is the read size for non-SSE bodies.
	tunnelReadSize = 32 << 10
	// maxUsageTail is how much of a JSON body is kept to find its usage.
	maxUsageTail = 4 << 20
)

// Request headers the tunnel never forwards besides hop-by-hop ones: the
// caller's credentials (the Node adds the provider's own key), those the
// HTTP client computes itself, and Accept-Encoding, so that the upstream
// answers in identity encoding: only then can SSE be split at event
// boundaries and usage be observed. The Edge compresses for its own
// clients if it wants to.
var tunnelDropRequest = map[string]bool{
	"Authorization":   true,
	"Host":            true,
	"Content-Length":  true,
	"Accept-Encoding": true,
}

// Tunnel performs a raw provider request and relays the response unaltered.
func (in *Instance) Tunnel(ctx context.Context, treq *iop.ProviderTunnelRequest, sink adapter.TunnelSink) error {
	c := in.cfg.Load()
	timeout := c.requestTimeout(treq.GetTimeoutSec())
	rctx, cancel := withTimeout(ctx, timeout)
	defer cancel()

	req, err := in.tunnelRequest(rctx, c, treq)
	if err != nil {
		return err
	}
	resp, err := in.client.Do(req)
	if err != nil {
		return transportError(ctx, rctx, timeout, "tunnel", err)
	}
	defer resp.Body.Close()

	if err := sink.Status(resp.StatusCode, responseHeaders(resp.Header)); err != nil {
		return sinkError("tunnel status", err)
	}
	err = relayBody(resp, sink)
	if err != nil && !isSinkErr(err) {
		return transportError(ctx, rctx, timeout, "tunnel body", err)
	}
	return err
}

func (in *Instance) tunnelRequest(ctx context.Context, c *config, treq *iop.ProviderTunnelRequest) (*http.Request, error) {
	u, err := c.resolve(treq.GetPath())
	if err != nil {
		return nil, &adapter.Error{Code: adapter.CodeInvalidRequest, Message: "invalid tunnel path", Err: err}
	}
	method := treq.GetMethod()
	if method == "" {
		method = http.MethodPost
		if len(treq.GetBody()) == 0 {
			method = http.MethodGet
		}
	}
	if !validHeaderName(method) {
		return nil, &adapter.Error{Code: adapter.CodeInvalidRequest, Message: "invalid tunnel method"}
	}
	var body io.Reader
	if len(treq.GetBody()) > 0 {
		body = bytes.NewReader(treq.GetBody())
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, &adapter.Error{Code: adapter.CodeInvalidRequest, Message: "invalid tunnel request", Err: err}
	}
	var connection []string
	for _, h := range treq.GetHeaders() {
		if http.CanonicalHeaderKey(h.GetName()) == "Connection" {
			connection = append(connection, h.GetValue())
		}
	}
	drop := connectionTokens(connection)
	for _, h := range treq.GetHeaders() {
		name := h.GetName()
		if !validHeaderName(name) || strings.ContainsAny(h.GetValue(), "\r\n\x00") {
			continue
		}
		canon := http.CanonicalHeaderKey(name)
		if isHopByHop(canon) || tunnelDropRequest[canon] || drop[canon] {
			continue
		}
		req.Header.Add(canon, h.GetValue())
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	in.authorize(req, c)
	return req, nil
}

// sinkErr wraps a sink failure so that it is not mistaken for a read error.
type sinkErr struct{ err error }

func (e *sinkErr) Error() string { return "openaicompat: sink: " + e.err.Error() }
func (e *sinkErr) Unwrap() error { return e.err }

func isSinkErr(err error) bool {
	var se *sinkErr
	return errors.As(err, &se)
}

// relayBody streams resp.Body to sink: SSE split at event boundaries, other
// bodies as read. Usage is observed on the side, never by altering bytes.
func relayBody(resp *http.Response, sink adapter.TunnelSink) error {
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	encoded := !identityEncoding(resp.Header.Get("Content-Encoding"))
	switch {
	case mediaType == "text/event-stream" && !encoded:
		return relaySSE(resp.Body, sink)
	case mediaType == "application/json" && !encoded:
		return relayJSON(resp.Body, sink)
	default:
		return relayRaw(resp.Body, sink, nil)
	}
}

func identityEncoding(v string) bool {
	v = strings.TrimSpace(v)
	return v == "" || strings.EqualFold(v, "identity")
}

// readBufs recycles tunnel read buffers: a held stream or a burst of short
// requests would otherwise allocate tunnelReadSize each. The sink copies
// what it is given, so a buffer is free again when the relay returns.
var readBufs = sync.Pool{New: func() any { b := make([]byte, tunnelReadSize); return &b }}

// sseReadBufs are smaller: events are small and a stream may be held open
// for minutes, so its buffer is memory per concurrent stream.
var sseReadBufs = sync.Pool{New: func() any { b := make([]byte, 4<<10); return &b }}

// relaySSE relays an event stream. Usage is cumulative in OpenAI streams
// (with continuous_usage_stats every chunk carries the running total), so
// the last usage seen is reported once, when the body ends, and is never
// counted twice.
func relaySSE(r io.Reader, sink adapter.TunnelSink) error {
	sp := newSSESplitter(maxSSEEvent)
	bp := sseReadBufs.Get().(*[]byte)
	defer sseReadBufs.Put(bp)
	buf := *bp
	var last *iop.Usage
	emit := func(chunk []byte) error {
		if len(chunk) == 0 {
			return nil
		}
		if err := sink.Body(chunk); err != nil {
			return &sinkErr{err}
		}
		return forEachEvent(chunk, func(data []byte) error {
			if u := sseUsage(data); u != nil {
				last = u
			}
			return nil
		})
	}
	report := func() error {
		if last == nil {
			return nil
		}
		if err := sink.Usage(last); err != nil {
			return &sinkErr{err}
		}
		return nil
	}
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if eerr := emit(sp.push(buf[:n])); eerr != nil {
				return eerr
			}
		}
		if errors.Is(err, io.EOF) {
			if eerr := emit(sp.flush()); eerr != nil {
				return eerr
			}
			return report()
		}
		if err != nil {
			// The unfinished event is dropped: the caller ends the stream
			// with an error event, which must not be glued onto half of
			// one. Usage seen so far is still worth reporting.
			if rerr := report(); rerr != nil {
				return rerr
			}
			return err
		}
	}
}

// sseUsage returns the usage of one event's data when it carries a non-null
// "usage" object (the include_usage chunk, or every chunk with
// continuous_usage_stats).
func sseUsage(data []byte) *iop.Usage {
	if !bytes.Contains(data, []byte(`"usage"`)) {
		return nil
	}
	var chunk struct {
		Usage *usageJSON `json:"usage"`
	}
	if json.Unmarshal(data, &chunk) != nil || chunk.Usage == nil {
		return nil
	}
	return chunk.Usage.proto()
}

// relayJSON relays a JSON body as read and reports its usage at the end.
// Only the last maxUsageTail bytes are kept: OpenAI-style servers put
// "usage" last, and embeddings responses can be large.
func relayJSON(r io.Reader, sink adapter.TunnelSink) error {
	tail := &tailBuffer{limit: maxUsageTail}
	if err := relayRaw(r, sink, tail); err != nil {
		return err
	}
	if u := tail.usage(); u != nil {
		if err := sink.Usage(u); err != nil {
			return &sinkErr{err}
		}
	}
	return nil
}

func relayRaw(r io.Reader, sink adapter.TunnelSink, tail *tailBuffer) error {
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	buf := *bp
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if serr := sink.Body(buf[:n]); serr != nil {
				return &sinkErr{serr}
			}
			if tail != nil {
				tail.write(buf[:n])
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// tailBuffer keeps at least the last limit bytes written to it. It trims
// only when it reaches twice the limit, so trimming costs O(1) amortized.
type tailBuffer struct {
	buf       []byte
	limit     int
	truncated bool
}

func (t *tailBuffer) write(p []byte) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.limit {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.limit:]...)
		t.truncated = true
	}
}

// usage finds the top-level usage object. A whole body is decoded; a
// truncated one is searched for its last `"usage":` key, which outside of
// a string can only be an object key (quotes inside JSON strings are
// escaped), and the value after it is decoded.
func (t *tailBuffer) usage() *iop.Usage {
	if !t.truncated {
		var doc struct {
			Usage *usageJSON `json:"usage"`
		}
		if json.Unmarshal(t.buf, &doc) != nil || doc.Usage == nil {
			return nil
		}
		return doc.Usage.proto()
	}
	i := bytes.LastIndex(t.buf, []byte(`"usage"`))
	if i < 0 {
		return nil
	}
	rest := bytes.TrimLeft(t.buf[i+len(`"usage"`):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return nil
	}
	var u *usageJSON
	if json.NewDecoder(bytes.NewReader(rest[1:])).Decode(&u) != nil || u == nil {
		return nil
	}
	return u.proto()
}

// usageJSON is the OpenAI usage object.
type usageJSON struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

func (u *usageJSON) proto() *iop.Usage {
	if u == nil {
		return nil
	}
	total := u.TotalTokens
	if total == 0 {
		total = u.PromptTokens + u.CompletionTokens
	}
	return &iop.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: total}
}
