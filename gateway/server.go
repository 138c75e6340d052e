// Package gateway is iop-edge's HTTP surface: the OpenAI-compatible
// endpoints (tunnel relay and rendered runs), health, metrics and admin.
// Handlers are thin: bind, validate, call dispatch, render; apiError is the
// one mapping from errors to the OpenAI envelope.
package gateway

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"

	"github.com/iop-gateway/iop/config"
	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/gateway/anthropicapi"
	"github.com/iop-gateway/iop/gateway/openaiapi"
	"github.com/iop-gateway/iop/internal/sockopt"
	"github.com/iop-gateway/iop/tracing"
)

// Options configures a Server.
type Options struct {
	Dispatcher *dispatch.Dispatcher
	Config     *config.Edge
	Logger     *zap.Logger
	Metrics    *Metrics
	// Gatherer serves /metrics; nil means prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// Reload re-reads the config file (POST /admin/reload); nil disables it.
	Reload func() (*ReloadReport, error)
	// Tracer traces API requests; nil means no tracing.
	Tracer trace.TracerProvider
}

// Server is the HTTP surface.
type Server struct {
	d       *dispatch.Dispatcher
	log     *zap.Logger
	metrics *Metrics
	reload  func() (*ReloadReport, error)
	engine  *gin.Engine
	auth    atomic.Pointer[authState]
	limits  atomic.Pointer[config.EdgeLimits]
	models  atomic.Pointer[modelIndex]
	// allowCORS is cors.allowed_origins in force; nil when off.
	allowCORS atomic.Pointer[corsPolicy]
	tracer    trace.Tracer
	tracing   bool // tracer is not the no-op one
	created   int64
	// adminWait overrides defaultAdminTimeout when positive (tests only);
	// atomic, as a test sets it while the server runs.
	adminWait atomic.Int64
}

// authState is the credentials in force, swapped on reload. Keys are kept
// as digests so comparisons are constant-time and fixed-length.
type authState struct {
	apiKeys    [][32]byte
	priorities []int // by apiKeys index: the key's queue priority
	adminToken *[32]byte
}

type modelIndex struct{ names []string }

// New builds the server.
func New(opts Options) *Server {
	gin.SetMode(gin.ReleaseMode)
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	if opts.Gatherer == nil {
		opts.Gatherer = prometheus.DefaultGatherer
	}
	if opts.Tracer == nil {
		opts.Tracer = noop.NewTracerProvider()
	}
	s := &Server{d: opts.Dispatcher, log: opts.Logger, metrics: opts.Metrics, reload: opts.Reload, created: time.Now().Unix(),
		tracer: opts.Tracer.Tracer("github.com/iop-gateway/iop/gateway")}
	_, noopTracer := opts.Tracer.(noop.TracerProvider)
	s.tracing = !noopTracer
	s.SetConfig(opts.Config)

	e := gin.New()
	e.ContextWithFallback = false
	// A known path asked with a method it is not served with is a 405
	// with Allow (RFC 9110 §15.5.6), not a 404 that reads as a wrong URL.
	// gin consults the other methods' trees only on a miss, so a served
	// request costs nothing more.
	e.HandleMethodNotAllowed = true
	// Routes match the path as sent, escapes and all, and their
	// parameters are unescaped after: a node id, session id or model
	// with a '/' in it is addressable as %2F ("/admin/nodes/rack%2F1/
	// refresh"). Matched on the decoded path, that '/' split the id in
	// two and the request was a 404.
	e.UseRawPath = true
	// recoverer runs inside accessLog, so that a panic is logged and
	// counted with the status it is answered with, not the 200 gin's
	// writer holds before anything is written.
	e.Use(s.requestID, s.readDeadline, s.accessLog, s.recoverer, s.trace)
	e.NoRoute(notFound)
	e.NoMethod(methodNotAllowed)

	// Every GET path answers HEAD as GET does (getHead): load balancers
	// and uptime monitors probe with HEAD and would read a 405 as a dead
	// edge or a moved API.
	healthz := func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) }
	getHead(e, "/healthz", healthz)
	getHead(e, "/readyz", s.readyz)
	getHead(e, "/metrics", gin.WrapH(promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{})))

	// The Anthropic front wraps auth and body limits too, so their refusals
	// leave in Anthropic's shape; registered before the group's routes.
	e.POST(messagesPath, s.anthropicFront, s.apiAuth, s.bodyLimit, s.messages)
	e.POST(countTokensPath, s.anthropicFront, s.apiAuth, s.bodyLimit, s.countTokens)
	v1 := e.Group("/v1", s.apiAuth)
	getHead(v1, "/models", s.listModels)
	// Catch-all: model ids often contain "/" (e.g. meta-llama/Llama-3.1-8B).
	getHead(v1, "/models/*id", s.getModel)
	v1.POST("/chat/completions", s.bodyLimit, s.chatCompletions)
	v1.POST("/completions", s.bodyLimit, s.completions)
	v1.POST("/embeddings", s.bodyLimit, s.embeddings)
	v1.POST("/responses", s.bodyLimit, s.responses)

	admin := e.Group("/admin", s.adminAuth)
	getHead(admin, "/status", s.adminStatus)
	admin.POST("/reload", s.adminReload)
	admin.POST("/nodes/:id/refresh", s.adminRefresh)
	getHead(admin, "/nodes/:id/commands/:type", s.adminCommand)
	admin.POST("/sessions/:session_id/terminate", s.adminTerminate)
	s.registerStatusPage(e) // GET and HEAD /admin (page) and /admin/events, beside the admin group
	s.engine = e
	return s
}

// getHead serves path with GET and HEAD alike. net/http sends a HEAD
// answer's status and headers (Content-Length too, when the body fits its
// buffer, as for GET) and drops the body the handler writes.
func getHead(r gin.IRoutes, path string, handlers ...gin.HandlerFunc) {
	r.Match(getAndHead, path, handlers...)
}

var getAndHead = []string{http.MethodGet, http.MethodHead}

// The Anthropic surface's paths: their refusals leave in Anthropic's shape.
const (
	messagesPath    = "/v1/messages"
	countTokensPath = "/v1/messages/count_tokens"
)

func notFound(c *gin.Context) {
	writeError(c, &openaiapi.Error{Status: http.StatusNotFound, Type: openaiapi.TypeInvalidRequest, Code: "not_found", Message: "Unknown endpoint " + c.Request.Method + " " + c.Request.URL.Path})
}

// methodNotAllowed answers a served path asked with another method; gin
// has set Allow to the methods it is served with. It comes before the
// path's auth, as an unknown path's 404 does: the methods of every path
// are in the README. OPTIONS is the CORS preflight's method and keeps its
// answers (cors.go): with CORS off, the 404 it always had.
func methodNotAllowed(c *gin.Context) {
	if c.Request.Method == http.MethodOptions {
		c.Writer.Header().Del("Allow")
		notFound(c)
		return
	}
	allow := c.Writer.Header().Get("Allow")
	msg := "Method " + c.Request.Method + " is not allowed on " + c.Request.URL.Path + "; it is served with " + allow + "."
	if p := c.Request.URL.Path; p == messagesPath || p == countTokensPath {
		info(c).surface = surfaceAnthropic
		abandonBody(c) // as writeError does: the body is never read
		writeAnthropicError(c, &anthropicapi.Error{Status: http.StatusMethodNotAllowed, Type: anthropicapi.TypeInvalidRequest, Message: msg})
		return
	}
	writeError(c, &openaiapi.Error{Status: http.StatusMethodNotAllowed, Type: openaiapi.TypeInvalidRequest, Code: "method_not_allowed", Message: msg})
}

// HTTPServer returns the http.Server iop-edge runs the surface with:
// bounded header size and header read time (limits.read_header_timeout_sec),
// idle keep-alives closed after limits.idle_timeout_sec. It has no
// ReadTimeout and no WriteTimeout: a connection-wide read deadline would
// still be armed while a long stream is relayed and, when it passed, net/http
// would cancel the request; the body's read deadline is set per request
// instead (readDeadline), and per-write deadlines bound slow readers.
// These three take effect at start; a reload does not change them.
func (s *Server) HTTPServer() *http.Server {
	l := s.limits.Load()
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: time.Duration(l.ReadHeaderTimeoutSec) * time.Second,
		IdleTimeout:       time.Duration(l.IdleTimeoutSec) * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          zap.NewStdLog(s.log.Named("http")),
		// Once per connection: bound what its socket holds unsent, so
		// that a per-write deadline fails a client that stops reading,
		// not one that reads slowly (notsent.go).
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			sockopt.BoundUnsent(c, clientNotSentLowat)
			return ctx
		},
	}
}

// Handler is the http.Handler to serve: the router, each request's writer
// wrapped with the request's reqInfo (infoWriter).
func (s *Server) Handler() http.Handler { return infoHandler{s.engine} }

// infoHandler serves the router with each request's writer wrapped in an
// infoWriter, where the request's reqInfo lives. Held in gin's Keys, it
// cost a map per request (~690 B: the map and its first group), kept for
// as long as a stream is held; the wrapper costs the reqInfo it carries.
type infoHandler struct{ e *gin.Engine }

func (h infoHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.e.ServeHTTP(&infoWriter{ResponseWriter: w}, r)
}

// Routes is the router's routes.
func (h infoHandler) Routes() gin.RoutesInfo { return h.e.Routes() }

// infoWriter is the connection's response writer with the request's
// reqInfo beside it (see infoHandler). It passes on what gin's writer asks
// of the one it wraps (Flush, Hijack, CloseNotify) and unwraps for
// http.ResponseController (deadlines, full duplex).
type infoWriter struct {
	http.ResponseWriter
	in reqInfo
}

func (w *infoWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *infoWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *infoWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// CloseNotify is gin's writer's CloseNotify passed on (gin asks for it
// of the writer it wraps, with no check).
func (w *infoWriter) CloseNotify() <-chan bool {
	return w.ResponseWriter.(http.CloseNotifier).CloseNotify() //nolint:staticcheck // gin's writer requires it
}

// SetConfig swaps the auth, limits and model list in force (hot reload).
func (s *Server) SetConfig(cfg *config.Edge) {
	a := &authState{}
	for _, k := range cfg.Auth.APIKeys {
		a.apiKeys = append(a.apiKeys, credentialDigest(k))
		prio := 0
		for _, kp := range cfg.Auth.KeyPriorities {
			if kp.Key == k {
				prio = kp.Priority
			}
		}
		a.priorities = append(a.priorities, prio)
	}
	if cfg.Auth.AdminToken != "" {
		d := credentialDigest(cfg.Auth.AdminToken)
		a.adminToken = &d
	}
	s.auth.Store(a)
	limits := cfg.Limits
	s.limits.Store(&limits)
	idx := &modelIndex{}
	for _, m := range cfg.Models {
		idx.names = append(idx.names, m.Name)
	}
	s.models.Store(idx)
	s.metrics.declareModels(idx.names)
	s.allowCORS.Store(newCORSPolicy(cfg.CORS))
}

// credentialDigest is the digest a configured API key or admin token is
// compared by. A request's credential is read without surrounding spaces
// (bearer), so the configured one is trimmed the same way: a list given as
// IOP_AUTH_API_KEYS="sk-a, sk-b" has the key " sk-b", which no request
// could otherwise present. One of spaces only keeps a digest no request
// matches (presented credentials are never empty), so it still guards.
func credentialDigest(k string) [32]byte {
	if t := strings.TrimSpace(k); t != "" {
		k = t
	}
	return sha256.Sum256([]byte(k))
}

// bearer returns the request's "Authorization: Bearer" credential, or false
// when there is none or it is blank.
func bearer(c *gin.Context) (string, bool) {
	h := c.GetHeader(hdrAuthorization)
	const p = "Bearer "
	if len(h) > len(p) && strings.EqualFold(h[:len(p)], p) {
		tok := strings.TrimSpace(h[len(p):])
		return tok, tok != ""
	}
	return "", false
}

func (s *Server) apiAuth(c *gin.Context) {
	a := s.auth.Load()
	if len(a.apiKeys) == 0 {
		return
	}
	tok, ok := bearer(c)
	if !ok {
		// Anthropic's SDKs send the key in x-api-key.
		tok = strings.TrimSpace(c.GetHeader(hdrAPIKey))
		ok = tok != ""
	}
	if ok {
		d := sha256.Sum256([]byte(tok))
		match, prio := 0, 0
		for i := range a.apiKeys {
			// Every key is compared (constant time); the matching one's
			// priority is kept without a branch on the secret.
			eq := subtle.ConstantTimeCompare(d[:], a.apiKeys[i][:])
			match |= eq
			prio = subtle.ConstantTimeSelect(eq, a.priorities[i], prio)
		}
		if match == 1 {
			info(c).priority = prio
			return
		}
	}
	writeError(c, openaiapi.InvalidAPIKey())
}

func (s *Server) adminAuth(c *gin.Context) {
	a := s.auth.Load()
	if a.adminToken == nil {
		return
	}
	if tok, ok := bearer(c); ok {
		d := sha256.Sum256([]byte(tok))
		if subtle.ConstantTimeCompare(d[:], a.adminToken[:]) == 1 {
			return
		}
	}
	writeError(c, &openaiapi.Error{Status: http.StatusUnauthorized, Type: "authentication_error", Code: "invalid_admin_token", Message: "Missing or invalid admin token."})
}

// bodyLimit bounds request bodies; the handler's read reports an overrun.
// A body with a content coding (gzip, br, …) is refused unread: the edge
// reads bodies as sent, and decoding them would let a small compressed
// body expand past max_body_bytes, which bounds what arrives.
func (s *Server) bodyLimit(c *gin.Context) {
	limit := s.limits.Load().MaxBodyBytes
	if c.Request.ContentLength > limit {
		writeError(c, openaiapi.RequestTooLarge(limit))
		return
	}
	// An empty body (Content-Length: 0) has nothing to decode: it is
	// answered as any empty body is, not asked to be sent uncoded.
	if c.Request.ContentLength != 0 && !identityCoded(c.Request.Header) {
		c.Header("Accept-Encoding", "identity")
		writeError(c, unsupportedCoding())
		return
	}
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, limit)
}

// reqInfo is what a request's handler learned, for the access log line.
type reqInfo struct {
	requestID    string
	model        string
	node         string
	provider     string
	route        string
	ttft         time.Duration
	prompt       int64
	completion   int64
	cancelReason string
	// surface is the API surface the request came through (openai,
	// anthropic).
	surface string
	// priority is the request's key's queue priority (0 without keys).
	priority int
	// body is the request body's deadline guard; nil without a body.
	body *deadlineBody
	// outcome is the status a failure after the first byte maps to (the
	// response itself went out as 200): 0 when there was none. An HTTP
	// status (net/http takes 100 to 999 only), so 32 bits: beside linger
	// it shares one word, and the infoWriter holding this is 176 B, not
	// 184 (in the 192-byte class), for every held stream.
	outcome int32
	// linger: the answer came before the body was read; the connection
	// lingers briefly before it closes (deadlineBody.linger).
	linger bool
}

// infoKey holds a request's reqInfo in gin's Keys when the router is
// served without infoHandler (tests that serve the engine itself).
const infoKey = "iop.reqinfo"

func info(c *gin.Context) *reqInfo {
	in, _ := lookupInfo(c)
	return in
}

// lookupInfo is the request's reqInfo, if requestID has set one.
func lookupInfo(c *gin.Context) (*reqInfo, bool) {
	if iw := ownWriter(c.Writer); iw != nil {
		return &iw.in, true
	}
	v, ok := c.Get(infoKey)
	if !ok {
		return nil, false
	}
	return v.(*reqInfo), true
}

// maxWriterWraps bounds how many writers ownWriter unwraps: gin's, and
// those middlewares put around it (the Messages writer).
const maxWriterWraps = 8

// ownWriter is the infoWriter under w, or nil when the router is served
// without infoHandler.
func ownWriter(w http.ResponseWriter) *infoWriter {
	for range maxWriterWraps {
		if iw, ok := w.(*infoWriter); ok {
			return iw
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
	return nil
}

func (s *Server) requestID(c *gin.Context) {
	id := c.GetHeader(hdrRequestID)
	if id == "" || len(id) > 128 || !printableASCII(id) {
		id = newID("req_")
	}
	c.Header("X-Request-Id", id)
	if iw := ownWriter(c.Writer); iw != nil {
		iw.in = reqInfo{requestID: id, surface: surfaceOpenAI}
	} else {
		c.Set(infoKey, &reqInfo{requestID: id, surface: surfaceOpenAI})
	}
	s.cors(c)
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// newID is prefix and 96 random bits in hex: one allocation, the string.
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	var h [24]byte
	hex.Encode(h[:], b[:])
	var sb strings.Builder
	sb.Grow(len(prefix) + len(h))
	sb.WriteString(prefix)
	sb.Write(h[:])
	return sb.String()
}

// accessLog writes one line per request. It never logs prompts, keys or
// tokens.
//
// Its frame stays on the stack under the handler for the whole of a
// streamed response, so all the work after c.Next is in logRequest: a
// small parked frame lets the runtime keep that goroutine's stack at 8 KB
// instead of 16 KB (see the parked chain in tunnel).
func (s *Server) accessLog(c *gin.Context) {
	start := time.Now()
	// Deferred: a response aborted mid-body (a panic with
	// http.ErrAbortHandler) is counted and logged too.
	defer s.logRequest(c, start)
	c.Next()
}

// logRequest counts and logs a finished request (accessLog).
//
//go:noinline
func (s *Server) logRequest(c *gin.Context, start time.Time) {
	in := info(c)
	if !strings.HasPrefix(c.Request.URL.Path, "/v1/") {
		if p := c.Request.URL.Path; p == "/admin" || strings.HasPrefix(p, "/admin/") {
			s.logAdmin(c, in, start)
		}
		return
	}
	status := c.Writer.Status()
	model := in.model
	if model == "" {
		model = "unknown"
	}
	code := statusCode(status, in)
	s.metrics.request(model, in.route, code, time.Since(start))
	s.metrics.surface(in.surface, code)
	if !s.log.Core().Enabled(zap.InfoLevel) {
		return
	}
	fields := []zap.Field{
		zap.String("request_id", in.requestID), zap.String("method", c.Request.Method), zap.String("path", c.Request.URL.Path),
		zap.Int("status", status), zap.Duration("duration", time.Since(start)),
		zap.String("model", model), zap.String("node_id", in.node), zap.String("provider", in.provider), zap.String("route", in.route), zap.String("surface", in.surface),
	}
	if in.ttft > 0 {
		fields = append(fields, zap.Duration("ttft", in.ttft))
	}
	if in.prompt > 0 || in.completion > 0 {
		fields = append(fields, zap.Int64("prompt_tokens", in.prompt), zap.Int64("completion_tokens", in.completion))
	}
	if in.cancelReason != "" {
		fields = append(fields, zap.String("cancel_reason", in.cancelReason))
	}
	if sc := trace.SpanContextFromContext(c.Request.Context()); sc.HasTraceID() {
		fields = append(fields, zap.String("trace_id", sc.TraceID().String()))
	}
	s.log.Info("request", fields...)
}

// logAdmin writes the audit line of an /admin call: who (the peer's
// address: the edge trusts no forwarding header), what (method, path and
// route pattern), the outcome and how long it took. Refused calls (a wrong
// token) are logged alike. Never a header, the query or the body: the
// token travels in Authorization, and a reload's answer can name config
// problems.
func (s *Server) logAdmin(c *gin.Context, in *reqInfo, start time.Time) {
	s.log.Info("admin request",
		zap.String("request_id", in.requestID), zap.String("method", c.Request.Method), zap.String("path", c.Request.URL.Path),
		zap.String("endpoint", c.FullPath()), zap.Int("status", c.Writer.Status()), zap.Duration("duration", time.Since(start)),
		zap.String("remote_addr", c.Request.RemoteAddr))
}

// statusCode is a request's outcome for iop_requests_total{code}: the
// status a failure after the first byte maps to (the stream's error event,
// an aborted body), "cancelled" when the client went away or stopped
// reading, else the response status (a timeout answered 502 is a 502).
func statusCode(status int, in *reqInfo) string {
	switch {
	case in.outcome != 0:
		return itoa(int(in.outcome))
	case in.cancelReason != "" && in.cancelReason != CancelTimeout:
		return "cancelled"
	}
	return itoa(status)
}

func itoa(n int) string {
	if n >= 100 && n < 1000 {
		return string([]byte{byte('0' + n/100), byte('0' + n/10%10), byte('0' + n%10)})
	}
	return "other"
}

// trace opens the request's span (continuing a W3C traceparent the caller
// sent); its context travels to the node in run/tunnel metadata. Like
// accessLog, it keeps its own frame small (it is parked under streamed
// responses): opening and annotating the span are separate calls.
func (s *Server) trace(c *gin.Context) {
	if !strings.HasPrefix(c.Request.URL.Path, "/v1/") {
		return
	}
	if !s.tracing && c.Request.Header.Get("Traceparent") == "" {
		// A no-op span carries only the trace context a caller sent (it
		// is still logged and passed to the node); without one there is
		// nothing to carry, and no reason to clone the request.
		return
	}
	span := s.startSpan(c)
	defer span.End()
	c.Next()
	endSpan(c, span)
}

// startSpan opens the request's span and puts it in the request's context.
//
//go:noinline
func (s *Server) startSpan(c *gin.Context) trace.Span {
	ctx := tracing.FromHTTP(c.Request.Context(), propagation.HeaderCarrier(c.Request.Header))
	ctx, span := s.tracer.Start(ctx, spanName(c), trace.WithSpanKind(trace.SpanKindServer))
	c.Request = c.Request.WithContext(ctx)
	return span
}

// spanName is "{method} {route}" for a routed request. An unrouted one
// (404, 405) has no route to name it by, and its method is whatever the
// client sent: it is named by the method alone when that is one of the
// nine standard ones, else "HTTP" (OpenTelemetry's HTTP span names), so
// invented methods and paths do not make a span name each.
func spanName(c *gin.Context) string {
	if route := c.FullPath(); route != "" {
		return c.Request.Method + " " + route
	}
	switch m := c.Request.Method; m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	default:
		return "HTTP"
	}
}

// endSpan records what the handler learned on the span (trace).
//
//go:noinline
func endSpan(c *gin.Context, span trace.Span) {
	in := info(c)
	span.SetAttributes(
		attribute.String("iop.request_id", in.requestID), attribute.String("iop.model", in.model),
		attribute.String("iop.node", in.node), attribute.String("iop.provider", in.provider),
		attribute.String("iop.route", in.route), attribute.Int("http.response.status_code", c.Writer.Status()),
	)
	if in.cancelReason != "" {
		span.SetAttributes(attribute.String("iop.cancel_reason", in.cancelReason))
	}
	if c.Writer.Status() >= 500 {
		span.SetStatus(codes.Error, http.StatusText(c.Writer.Status()))
	}
}

// wireMetadata is the metadata every run and tunnel carries: the request id
// and the trace context.
func wireMetadata(ctx context.Context, requestID string) map[string]string {
	m := map[string]string{"request_id": requestID}
	tracing.Inject(ctx, m)
	return m
}

// recoverer answers a handler's panic with a 500 in the OpenAI envelope.
// When the answer had already started, it breaks the connection instead
// (http.ErrAbortHandler): a chunked body or SSE stream ended cleanly would
// read as a whole answer. Either way the request counts as a 500.
func (s *Server) recoverer(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r) // deliberate connection abort
			}
			s.log.Error("handler panic", zap.Any("panic", r), zap.String("path", c.Request.URL.Path), zap.Stack("stack"))
			if c.Writer.Written() {
				info(c).outcome = http.StatusInternalServerError
				c.Abort()
				panic(http.ErrAbortHandler)
			}
			writeError(c, openaiapi.InternalError("internal error"))
		}
	}()
	c.Next()
}

func (s *Server) readyz(c *gin.Context) {
	if s.d.Dispatchable() {
		c.JSON(http.StatusOK, gin.H{"status": "ready"})
		return
	}
	c.JSON(http.StatusServiceUnavailable, gin.H{"status": "no provider is dispatchable"})
}
