package openaicompat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/h1client"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

const (
	// tunnelReadSize is the read size for non-SSE bodies.
	tunnelReadSize = 32 << 10
	// maxUsageTail is how much of a JSON body is kept to find its usage.
	maxUsageTail = 4 << 20
)

// Request headers the tunnel never forwards besides hop-by-hop ones, even
// if the Edge sent them:
//   - the caller's credentials in every spelling providers accept
//     (Authorization, Azure's Api-Key, X-Api-Key) and cookies: the upstream
//     key lives on the Node, which sets its own after this filter, and a
//     client's key must never reach a provider it was not issued for;
//   - the client's address (X-Forwarded-*, Forwarded, X-Real-Ip): the
//     upstream has no use for it and it would leak the caller to it;
//   - those the HTTP client computes itself, and Accept-Encoding, so that
//     the upstream answers in identity encoding: only then can SSE be split
//     at event boundaries and usage be observed. The Edge compresses for
//     its own clients if it wants to.
var tunnelDropRequest = map[string]bool{
	"Authorization":       true,
	"Api-Key":             true,
	"X-Api-Key":           true,
	"Cookie":              true,
	"Proxy-Authorization": true,
	"X-Forwarded-For":     true,
	"X-Forwarded-Host":    true,
	"X-Forwarded-Proto":   true,
	"Forwarded":           true,
	"X-Real-Ip":           true,
	"Host":                true,
	"Content-Length":      true,
	"Accept-Encoding":     true,
}

// Bounds of the upstream response headers relayed to the Edge: they end up
// in a wire frame and in the API caller's response, and no OpenAI-style
// server needs more than a few dozen short ones. Counted after hop-by-hop
// headers are dropped, one per value (a header line), names plus values.
const (
	maxRelayHeaders     = 64
	maxRelayHeaderBytes = 16 << 10
	// maxResponseHeaderBytes is the transport's own read bound. Headers
	// between the relay bound and it fail with errHeadersTooLarge; beyond
	// it the transport refuses to read them at all.
	maxResponseHeaderBytes = 256 << 10
)

// errHeadersTooLarge is the cause of a tunnel failed by maxRelayHeaders or
// maxRelayHeaderBytes.
var errHeadersTooLarge = errors.New("openaicompat: upstream response headers exceed the relay bounds")

// checkRelayHeaders enforces the relay bounds on headers about to be sent.
func checkRelayHeaders(h http.Header) error {
	count, size := 0, 0
	for k, vs := range h {
		for _, v := range vs {
			count++
			size += len(k) + len(v)
		}
	}
	if count > maxRelayHeaders || size > maxRelayHeaderBytes {
		return &adapter.Error{
			Code:    adapter.CodeUpstream,
			Message: "The provider's response headers exceed the relay's bounds.",
			Err:     fmt.Errorf("%w: %d headers, %d bytes", errHeadersTooLarge, count, size),
		}
	}
	return nil
}

// Tunnel performs a raw provider request and relays the response unaltered.
func (in *Instance) Tunnel(ctx context.Context, treq *iop.ProviderTunnelRequest, sink adapter.TunnelSink) error {
	c := in.cfg.Load()
	timeout := c.requestTimeout(treq.GetTimeoutSec())
	rctx, cancel := withTimeout(ctx, timeout)
	defer cancel()

	req, release, err := in.tunnelRequest(rctx, c, treq)
	if err != nil {
		return err
	}
	resp, err := adapter.RoundTrip(in.client, req)
	release()
	if err != nil {
		return transportError(ctx, rctx, timeout, "tunnel", err)
	}
	defer resp.Body.Close()

	// How the body is read is decided by what the provider said it is,
	// before the headers are filtered: a Content-Type its Connection header
	// nominates is not relayed, but the body is still that type.
	relay := relayFor(resp.Header)
	header := responseHeaders(resp.Header)
	if err := checkRelayHeaders(header); err != nil {
		return err
	}
	if err := sink.Status(resp.StatusCode, header); err != nil {
		return sinkError("tunnel status", err)
	}
	// The headers went out with the status: a held stream keeps neither
	// copy (about 1 KB each) for its lifetime.
	resp.Header = nil
	err = relay(resp.Body, sink)
	if err != nil && !isSinkErr(err) {
		return transportError(ctx, rctx, timeout, "tunnel body", err)
	}
	return err
}

// tunnelRequest builds the upstream request of treq; release lets go of
// its body once the request is done (see h1client.NewRequest).
func (in *Instance) tunnelRequest(ctx context.Context, c *config, treq *iop.ProviderTunnelRequest) (req *http.Request, release func(), err error) {
	u, err := c.resolve(treq.GetPath())
	if err != nil {
		return nil, nil, &adapter.Error{Code: adapter.CodeInvalidRequest, Message: "invalid tunnel path", Err: err}
	}
	method := treq.GetMethod()
	if method == "" {
		method = http.MethodPost
		if len(treq.GetBody()) == 0 {
			method = http.MethodGet
		}
	}
	if !validHeaderName(method) {
		return nil, nil, &adapter.Error{Code: adapter.CodeInvalidRequest, Message: "invalid tunnel method"}
	}
	req, release, err = h1client.NewRequest(ctx, method, u.String(), treq.GetBody())
	if err != nil {
		return nil, nil, &adapter.Error{Code: adapter.CodeInvalidRequest, Message: "invalid tunnel request", Err: err}
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
	if len(treq.GetBody()) > 0 && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	in.authorize(req, c)
	return req, release, nil
}

// sinkErr wraps a sink failure so that it is not mistaken for a read error.
type sinkErr struct{ err error }

func (e *sinkErr) Error() string { return "openaicompat: sink: " + e.err.Error() }
func (e *sinkErr) Unwrap() error { return e.err }

func isSinkErr(err error) bool {
	var se *sinkErr
	return errors.As(err, &se)
}

// relayFor picks how a response body with header h is streamed to the
// sink: SSE split at event boundaries, other bodies as read. Usage is
// observed on the side, never by altering bytes.
func relayFor(h http.Header) func(io.Reader, adapter.TunnelSink) error {
	mediaType, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	encoded := !identityEncoding(h.Get("Content-Encoding"))
	switch {
	case mediaType == "text/event-stream" && !encoded:
		return relaySSE
	case mediaType == "application/json" && !encoded:
		return relayJSON
	default:
		return relayAny
	}
}

// relayAny relays a body of any other type as read.
func relayAny(r io.Reader, sink adapter.TunnelSink) error { return relayRaw(r, sink, nil) }

func identityEncoding(v string) bool {
	v = strings.TrimSpace(v)
	return v == "" || strings.EqualFold(v, "identity")
}

// readBufs recycles tunnel read buffers: a held stream or a burst of short
// requests would otherwise allocate tunnelReadSize each. The sink copies
// what it is given, so a buffer is free again when the relay returns.
var readBufs = sync.Pool{New: func() any { b := make([]byte, tunnelReadSize); return &b }}

// An SSE relay that reads its body (a body that pushes, h1client's, needs
// no buffer here) waits for the stream's next bytes with only sseWaitSize
// bytes of its own: a stream may sit idle between events for minutes, and
// 10,000 held streams each waiting in a 4 KiB buffer would pin 40 MB. One
// chat-completion chunk event (~200-400 bytes) fits in the small read, so a
// paced stream never touches a larger buffer; when the small read comes
// back full, a burst is waiting, and the rest of it is read into a pooled
// sseBurstSize buffer, which goes back to the pool before the next wait.
const (
	sseWaitSize  = 512
	sseBurstSize = 4 << 10
)

var sseBurstBufs = sync.Pool{New: func() any { b := make([]byte, sseBurstSize); return &b }}

// relaySSE relays an event stream. Usage is cumulative in OpenAI streams
// (with continuous_usage_stats every chunk carries the running total), so
// the last usage seen is reported once, when the body ends, and is never
// counted twice.
//
// Once "[DONE]" has been relayed the stream is complete: a body the
// upstream leaves open after it is closed after afterFinishWait (when r is
// an io.Closer, as a response body is) and the relay ends as at the
// body's end, instead of holding the provider's slot, and the caller's
// response, until the edge gives up.
func relaySSE(r io.Reader, sink adapter.TunnelSink) error {
	sp := newSSESplitter(maxSSEEvent)
	var last *iop.Usage
	var cut doneCut
	defer cut.stop()
	emit := func(chunk []byte) error {
		if len(chunk) == 0 {
			return nil
		}
		if err := sink.Body(chunk); err != nil {
			return &sinkErr{err}
		}
		if !cut.seen && hasDone(chunk) {
			cut.arm(r)
		}
		// Most events carry no usage (or "usage":null): a look at the
		// whole chunk skips splitting it into events and their data.
		if !mayHaveUsage(chunk) {
			return nil
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
	if wt, ok := r.(io.WriterTo); ok {
		// The body hands over its bytes as they arrive (h1client's does,
		// reading the socket itself: between events it holds no buffer
		// and makes no read that finds the socket empty).
		_, err := wt.WriteTo(writeFunc(func(p []byte) error { return emit(sp.push(p)) }))
		switch {
		case err == nil, cut.fired.Load() && !isSinkErr(err):
			if eerr := emit(sp.flush()); eerr != nil {
				return eerr
			}
			return report()
		case isSinkErr(err):
			return err
		}
		// As below: the unfinished event is dropped, usage still reported.
		if rerr := report(); rerr != nil {
			return rerr
		}
		return err
	}
	small := make([]byte, sseWaitSize)
	for {
		n, err := r.Read(small)
		if n > 0 {
			// Emitted before any further read: that read may block until
			// the upstream's next event.
			if eerr := emit(sp.push(small[:n])); eerr != nil {
				return eerr
			}
		}
		if n == len(small) && err == nil {
			var eerr error
			if err, eerr = readBurst(r, sp, emit); eerr != nil {
				return eerr
			}
		}
		if errors.Is(err, io.EOF) || (err != nil && cut.fired.Load()) {
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

// doneCut closes a body left open after its stream's "[DONE]".
type doneCut struct {
	seen  bool // "[DONE]" was relayed
	t     *time.Timer
	fired atomic.Bool // the body was closed by t: its read error is the end
}

// arm notes "[DONE]" and, when r can be closed, starts the wait for the
// body's end.
func (d *doneCut) arm(r io.Reader) {
	d.seen = true
	c, ok := r.(io.Closer)
	if !ok {
		return
	}
	// Owner: relaySSE; stopped when it returns, fires at most once.
	d.t = time.AfterFunc(afterFinishWait, func() { d.fired.Store(true); _ = c.Close() })
}

func (d *doneCut) stop() {
	if d.t != nil {
		d.t.Stop()
	}
}

var doneMarker = []byte("[DONE]")

// hasDone reports whether chunk, whole events, holds an event whose data
// is "[DONE]" (spaces around it allowed, as the run path reads it). Most
// chunks do not contain the marker at all, and are not split into events.
func hasDone(chunk []byte) bool {
	if !bytes.Contains(chunk, doneMarker) {
		return false
	}
	found := false
	_ = forEachEvent(chunk, func(data []byte) error {
		found = found || bytes.Equal(bytes.TrimSpace(data), doneMarker)
		return nil
	})
	return found
}

// writeFunc is an io.Writer that hands each write to a function, which
// takes all of p or fails.
type writeFunc func(p []byte) error

func (f writeFunc) Write(p []byte) (int, error) {
	if err := f(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// readBurst reads once more into a pooled buffer, after a small read came
// back full, and emits what it completes: err is the read's error, emitErr
// emit's. The buffer is back in the pool when it returns. Like any read it
// may block, when the small read happened to take exactly what had
// arrived; what had arrived is emitted by then.
func readBurst(r io.Reader, sp *sseSplitter, emit func([]byte) error) (err, emitErr error) {
	bp := sseBurstBufs.Get().(*[]byte)
	defer sseBurstBufs.Put(bp)
	n, err := r.Read(*bp)
	if n > 0 {
		emitErr = emit(sp.push((*bp)[:n]))
	}
	return err, emitErr
}

var usageKey = []byte(`"usage"`)

// sseUsage returns the usage of one event's data when it carries a non-null
// "usage" object (the include_usage chunk, or every chunk with
// continuous_usage_stats). With include_usage every other chunk carries
// "usage":null, so the data is scanned (usageOfObject), not decoded.
func sseUsage(data []byte) *iop.Usage {
	if !bytes.Contains(data, usageKey) {
		return nil
	}
	return usageOfObject(data).proto()
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

// usage finds the top-level usage object. A whole body is scanned for it
// (usageOfObject); a truncated one is searched for its last `"usage":` key,
// which outside of a string can only be an object key (quotes inside JSON
// strings are escaped), and the value after it is decoded.
func (t *tailBuffer) usage() *iop.Usage {
	if !t.truncated {
		return usageOfObject(t.buf).proto()
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

// maxNesting is encoding/json's limit on nested objects and arrays.
const maxNesting = 10000

// usageOfObject returns what json.Unmarshal of body into
// struct{ Usage *usageJSON `json:"usage"` } leaves in Usage, or nil when it
// fails, without decoding the rest of the body: one pass over the bytes
// tracks strings (and their escapes) and nesting to find the members of
// the top-level object whose key encoding/json would match to "usage", and
// only their values are decoded, in order, into the same *usageJSON, as
// the full decode would. The pass checks that brackets match, strings end
// and nothing follows the object, but not the rest of the JSON grammar:
// unlike the full decode, it can find the usage of a body that is
// balanced but otherwise malformed.
func usageOfObject(body []byte) *usageJSON {
	i := skipSpace(body, 0)
	if i == len(body) || body[i] != '{' {
		return nil
	}
	var stackArr [64]byte
	stack := stackArr[:0] // open brackets
	var valsArr [2][2]int
	vals := valsArr[:0] // usage members' values, in order
	expectKey := false  // the next string at depth 1 is a key
	member := false     // inside the value of a usage member
	valStart := 0
	for ; i < len(body); i++ {
		switch c := body[i]; c {
		case '"':
			end := stringEnd(body, i+1)
			if end < 0 {
				return nil
			}
			if expectKey && len(stack) == 1 {
				expectKey = false
				j := skipSpace(body, end+1)
				if j == len(body) || body[j] != ':' {
					return nil
				}
				if isUsageKey(body[i : end+1]) {
					member, valStart = true, j+1
				}
				i = j
				continue
			}
			i = end
		case '{', '[':
			if len(stack) == maxNesting {
				return nil
			}
			stack = append(stack, c)
			expectKey = c == '{' && len(stack) == 1
		case '}', ']':
			if len(stack) == 0 || stack[len(stack)-1] != c-2 { // '{'+2 == '}', '['+2 == ']'
				return nil
			}
			if len(stack) == 1 {
				if member {
					vals, member = append(vals, [2]int{valStart, i}), false
				}
				if skipSpace(body, i+1) != len(body) {
					return nil
				}
				return decodeUsages(body, vals)
			}
			stack = stack[:len(stack)-1]
		case ',':
			if len(stack) == 1 {
				if member {
					vals, member = append(vals, [2]int{valStart, i}), false
				}
				expectKey = true
			}
		}
	}
	return nil // the object never ends
}

// decodeUsages decodes the usage members' values in order into one
// *usageJSON, as encoding/json does with a repeated key.
func decodeUsages(body []byte, vals [][2]int) *usageJSON {
	var u *usageJSON
	for _, v := range vals {
		val := body[v[0]:v[1]]
		if string(bytes.TrimSpace(val)) == "null" {
			u = nil // what Unmarshal does with null, without its allocations
			continue
		}
		var err error
		if u, err = decodeUsage(val, u); err != nil {
			return nil
		}
	}
	return u
}

// decodeUsage is json.Unmarshal(val, &u), which decodes into *u when u is
// not nil. Apart so that only a non-null value pays for u escaping.
func decodeUsage(val []byte, u *usageJSON) (*usageJSON, error) {
	err := json.Unmarshal(val, &u)
	return u, err
}

// isUsageKey reports whether encoding/json matches the quoted key to the
// field "usage": exactly, or folded (ASCII case, and Unicode letters that
// upper-case to the same, such as ſ for s).
func isUsageKey(quoted []byte) bool {
	key := quoted[1 : len(quoted)-1]
	if string(key) == "usage" {
		return true
	}
	if bytes.IndexByte(key, '\\') >= 0 {
		var s string
		if json.Unmarshal(quoted, &s) != nil {
			return false
		}
		key = []byte(s)
	}
	if len(key) > 2*len("usage") {
		return false
	}
	var folded [2 * len("usage")]byte
	out := folded[:0]
	for j := 0; j < len(key); {
		if c := key[j]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			j++
			continue
		}
		r, n := utf8.DecodeRune(key[j:])
		out = utf8.AppendRune(out, unicode.ToUpper(unicode.ToLower(r)))
		j += n
	}
	return string(out) == "USAGE"
}

// stringEnd returns the index of the quote that ends the string whose
// contents start at i, or -1.
func stringEnd(b []byte, i int) int {
	for {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return -1
		}
		q += i
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for k := q - 1; k >= i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q
		}
		i = q + 1
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// usageJSON is the OpenAI usage object.
type usageJSON struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// proto converts u for the wire. A negative count (a broken server) is
// zero, as in the Ollama adapter, so that no answer reports negative
// tokens; a missing or negative total is the sum, which saturates.
func (u *usageJSON) proto() *iop.Usage {
	if u == nil {
		return nil
	}
	prompt, completion := max(u.PromptTokens, 0), max(u.CompletionTokens, 0)
	total := u.TotalTokens
	if total <= 0 {
		total = math.MaxInt64
		if prompt <= math.MaxInt64-completion {
			total = prompt + completion
		}
	}
	return &iop.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: total}
}
