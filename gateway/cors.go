package gateway

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/gateway/openaiapi"
)

// corsPolicy is cors.allowed_origins in force, swapped on reload; nil when
// CORS is off. Only /v1/* answers carry CORS headers: /admin, /metrics and
// the probes are never for browsers on other origins.
type corsPolicy struct {
	any     bool // "*": every origin, answered with "*"
	origins map[string]struct{}
}

func newCORSPolicy(c config.EdgeCORS) *corsPolicy {
	if !c.Enabled() {
		return nil
	}
	if c.AnyOrigin() {
		return &corsPolicy{any: true}
	}
	p := &corsPolicy{origins: make(map[string]struct{}, len(c.AllowedOrigins))}
	for _, o := range c.AllowedOrigins {
		p.origins[o] = struct{}{}
	}
	return p
}

// The CORS answer's fixed values.
const (
	// corsExposeHeaders are the response headers a browser app may read:
	// the request id (OpenAI's and Anthropic's SDKs report it), when to
	// retry, and the rate-limit headers an OpenAI-compatible upstream
	// sends, which the relay passes through.
	corsExposeHeaders = "X-Request-Id, Request-Id, Retry-After, " +
		"X-Ratelimit-Limit-Requests, X-Ratelimit-Limit-Tokens, X-Ratelimit-Remaining-Requests, " +
		"X-Ratelimit-Remaining-Tokens, X-Ratelimit-Reset-Requests, X-Ratelimit-Reset-Tokens"
	corsAllowMethods = "GET, POST"
	// corsMaxAge lets a browser reuse a preflight for 10 minutes (Chrome
	// caps it at 2 hours, Firefox at 24).
	corsMaxAge = "600"
)

// corsRequestHeaders are the request headers a browser app may send: what
// the surfaces read, and what the OpenAI and Anthropic JavaScript SDKs send
// from a browser. Lower case, as browsers list them in
// Access-Control-Request-Headers. X-IOP-* and X-Stainless-* are matched by
// prefix (corsHeaderAllowed).
var corsRequestHeaders = map[string]bool{
	"authorization": true, "content-type": true, "accept": true, "x-api-key": true,
	"anthropic-version": true, "anthropic-beta": true, "anthropic-dangerous-direct-browser-access": true,
	"openai-beta": true, "openai-organization": true, "openai-project": true, "idempotency-key": true,
	"x-request-id": true, "traceparent": true, "tracestate": true,
}

func corsHeaderAllowed(name string) bool {
	return corsRequestHeaders[name] || strings.HasPrefix(name, "x-iop-") || strings.HasPrefix(name, "x-stainless-")
}

// maxCORSRequestHeaders bounds the names of one preflight's
// Access-Control-Request-Headers that are looked at; browsers list only
// the non-safelisted headers the app set, a dozen or so.
const maxCORSRequestHeaders = 64

// cors adds the CORS headers to a /v1/* answer for an allowed origin and
// answers its preflight (no auth: browsers send no credentials with one;
// neither logged nor counted: it is not an API request), aborting the
// chain. Called from requestID, so that with CORS off a request pays one
// atomic load, not a handler of its own.
func (s *Server) cors(c *gin.Context) {
	p := s.allowCORS.Load()
	if p == nil || !strings.HasPrefix(c.Request.URL.Path, "/v1/") {
		return
	}
	origin := c.Request.Header.Get("Origin")
	allowed := origin != "" && (p.any || p.allows(origin))
	h := c.Writer.Header()
	if !p.any {
		// The answer depends on Origin: a shared cache must not serve one
		// origin's answer (or a no-CORS one) to another.
		h.Add("Vary", "Origin")
	}
	method := c.Request.Header.Get("Access-Control-Request-Method")
	preflight := c.Request.Method == http.MethodOptions && origin != "" && method != ""
	if !allowed {
		if preflight {
			// No CORS headers: the browser refuses the call. The status
			// and envelope are for whoever debugs it with curl.
			writeError(c, &openaiapi.Error{Status: http.StatusForbidden, Type: openaiapi.TypeInvalidRequest, Code: "origin_not_allowed",
				Message: "This origin is not in cors.allowed_origins."})
		}
		return
	}
	if p.any {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		h.Set("Access-Control-Allow-Origin", origin)
	}
	if !preflight {
		h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		return
	}
	if method != http.MethodGet && method != http.MethodPost {
		// A 204 listing GET and POST would read as success to whoever
		// debugs the call, and the browser would refuse only at the
		// method. The allowed origin stays on the refusal, so the
		// browser blames the status (405, the method), not the origin.
		h.Set("Allow", corsAllowMethods)
		writeError(c, &openaiapi.Error{Status: http.StatusMethodNotAllowed, Type: openaiapi.TypeInvalidRequest, Code: "method_not_allowed",
			Message: "The API is served with GET and POST only."})
		return
	}
	h.Set("Access-Control-Allow-Methods", corsAllowMethods)
	if req := corsAllowHeaders(c.Request.Header.Values("Access-Control-Request-Headers")); req != "" {
		h.Set("Access-Control-Allow-Headers", req)
	}
	h.Set("Access-Control-Max-Age", corsMaxAge)
	c.AbortWithStatus(http.StatusNoContent)
}

func (p *corsPolicy) allows(origin string) bool {
	_, ok := p.origins[origin]
	return ok
}

// corsAllowHeaders is the Access-Control-Allow-Headers answer to the
// requested headers: those among the allowed, in the order asked. A header
// left out makes the browser refuse the call, as it should.
func corsAllowHeaders(requested []string) string {
	var b strings.Builder
	n := 0
	for _, line := range requested {
		for name := range strings.SplitSeq(line, ",") {
			if n++; n > maxCORSRequestHeaders {
				return b.String()
			}
			name = strings.ToLower(strings.TrimSpace(name))
			if name == "" || !corsHeaderAllowed(name) {
				continue
			}
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			b.WriteString(name)
		}
	}
	return b.String()
}
