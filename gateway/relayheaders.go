package gateway

import (
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/iop-gateway/iop/gateway/openaiapi"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// The headers a tunnel relays: the client's request headers it carries to
// the upstream (an allow list), and the checks and filter the provider's
// response head passes before it reaches the client.

// forwardedRequestHeaders is the allow list of client request headers a
// tunnel carries to the upstream; every other header stays at the edge. An
// allow list rather than a deny list: a header nobody thought of (a new
// credential scheme, a proxy's X-Forwarded-*) must not leak by default.
//
// Deliberately absent: Authorization, Api-Key, X-Api-Key, Cookie (client
// credentials; the node adds the provider's own key), OpenAI-Organization
// and OpenAI-Project (they name the client's OpenAI account, not the
// node's), X-Forwarded-*, Forwarded, X-Real-Ip (the client's address is
// not the upstream's business), Proxy-* and hop-by-hop headers, Host and
// Content-Length (the node's HTTP client sets them), Accept-Encoding (the
// node's HTTP client negotiates compression itself and hands the relay
// decoded bodies, which it can split into events, count usage in and
// which a client that asked for no compression can read), X-Stainless-*
// (SDK telemetry: client OS, runtime and retry count, of no use to a
// model server), X-Request-Id and traceparent (they travel as run
// metadata) and X-IOP-Session-Id (the edge's own header).
//
// Names are in canonical form (http.CanonicalHeaderKey), as net/http keys
// them.
var forwardedRequestHeaders = [...]string{
	// The body's media type: the upstream parses by it.
	"Content-Type",
	// What the client accepts back (JSON or an event stream).
	"Accept",
	// Identifies the client software in the upstream's logs; carries no
	// credential.
	"User-Agent",
	// OpenAI-Beta: opts into beta API behaviour (e.g. "assistants=v2");
	// without it a passthrough request would mean something else
	// upstream.
	"Openai-Beta",
}

func forwardHeaders(h http.Header) []*iop.Header {
	// The headers are allocated together, in one block, rather than one
	// by one.
	n := 0
	for _, name := range forwardedRequestHeaders {
		n += len(h[name])
	}
	if n == 0 {
		return nil
	}
	out := make([]*iop.Header, 0, n)
	block := make([]iop.Header, n)
	for _, name := range forwardedRequestHeaders {
		for _, v := range h[name] {
			hd := &block[len(out)]
			hd.Name, hd.Value = name, v
			out = append(out, hd)
		}
	}
	return out
}

// Bounds on the response head a node relays: a hostile or broken node (or
// upstream) must not make the edge hold or send an unbounded header block.
const (
	maxResponseHeaders     = 64
	maxResponseHeaderBytes = 16 << 10 // names + values
)

// droppedResponseHeaders never reach the client: hop-by-hop headers, the
// framing the edge sets itself, the node's request id (the edge has its
// own), cookies (an upstream must not set cookies on the edge's domain)
// and CORS headers (cors.allowed_origins decides which browser apps may
// call the edge: an upstream's "*" would open it with CORS off, and
// beside the edge's own make the browser refuse the answer).
var droppedResponseHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Content-Length": true, "X-Request-Id": true, "Set-Cookie": true,
	"Access-Control-Allow-Origin": true, "Access-Control-Allow-Credentials": true, "Access-Control-Expose-Headers": true,
	"Access-Control-Allow-Methods": true, "Access-Control-Allow-Headers": true, "Access-Control-Max-Age": true,
}

// checkHead names what makes a status frame unfit to relay, or "".
func checkHead(f *iop.ProviderTunnelFrame) string {
	if code := f.GetStatusCode(); !openaiapi.ValidStatus(code) || code < http.StatusOK {
		// net/http panics on codes outside 100–999; anything outside
		// 100–599 is not HTTP. A 1xx is never an answer's final status:
		// net/http would send it as an interim response and then a 200 of
		// its own (101: a protocol switch nobody asked for).
		return "invalid status " + strconv.Itoa(int(code))
	}
	hs := f.GetHeaders()
	if len(hs) > maxResponseHeaders {
		return "too many headers"
	}
	size := 0
	for _, hd := range hs {
		size += len(hd.GetName()) + len(hd.GetValue())
	}
	if size > maxResponseHeaderBytes {
		return "headers too large"
	}
	return ""
}

// bodyAllowed reports whether an answer of status may carry a body (RFC
// 9110 §6.4.1; checkHead has refused 1xx): net/http fails every write of
// a body after a 204 or 304.
func bodyAllowed(status int) bool {
	return status != http.StatusNoContent && status != http.StatusNotModified
}

// copyHeaders copies the provider's headers that may reach the client
// (none that net/http would refuse or mangle, none hop-by-hop: also those
// its Connection header nominates, RFC 9110 §7.6.1) without committing a
// status.
func (t *tunnelExchange) copyHeaders() {
	h := t.c.Writer.Header()
	hs := t.status.GetHeaders()
	var nominated []string // the Connection values; nil (no allocation) in the usual answer without one
	for _, hd := range hs {
		if strings.EqualFold(hd.GetName(), "Connection") {
			nominated = append(nominated, hd.GetValue())
		}
	}
	// The values of names not yet in h share one block, rather than one
	// slice each (h.Add's). Each name's slice is capped at its one value, so
	// a later value of the same name (or anyone's Add) copies it out
	// instead of writing over the next name's.
	var block []string
	for _, hd := range hs {
		name := http.CanonicalHeaderKey(hd.GetName())
		if droppedResponseHeaders[name] || !httpguts.ValidHeaderFieldName(name) || !httpguts.ValidHeaderFieldValue(hd.GetValue()) {
			continue
		}
		if nominated != nil && httpguts.HeaderValuesContainsToken(nominated, name) {
			continue
		}
		if name == "Content-Type" && h[name] != nil {
			// A singleton field (RFC 9110 §8.3): the first valid one is
			// what head judged the answer by.
			continue
		}
		if vs := h[name]; vs != nil {
			h[name] = append(vs, hd.GetValue())
			continue
		}
		if block == nil {
			block = make([]string, 0, len(hs))
		}
		block = append(block, hd.GetValue())
		h[name] = block[len(block)-1 : len(block) : len(block)]
	}
}
