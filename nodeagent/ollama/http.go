package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/iop-gateway/iop/nodeagent/adapter"
	"github.com/iop-gateway/iop/nodeagent/h1client"
)

// maxErrorBody bounds how much of a non-2xx body is read for its message.
const maxErrorBody = 64 << 10

// maxErrorDrain bounds what is read and discarded of a non-2xx body past
// maxErrorBody (a proxy's error page, a long error text), so that its
// connection goes back to the keep-alive pool; a longer or slower body
// (errorDrainTime) loses the connection instead.
const maxErrorDrain = 256 << 10

// errorDrainTime bounds the time spent draining an error body, whatever
// the request's own deadline (none when timeout_sec is 0): the error is
// ready, and a peer that stalls mid-body costs it its connection after
// this, not the wait. A second, not drainAfterDone: an error page of a few
// hundred KiB on a loaded host should still come back to the pool.
const errorDrainTime = time.Second

// drainAfterDone bounds the wait for a stream's end after its done line.
const drainAfterDone = 100 * time.Millisecond

// errRunTimeout is the cancellation cause of the adapter's own deadline, so
// it can be told apart from a caller's cancellation or deadline.
var errRunTimeout = errors.New("ollama: request timed out")

// maxResponseHeaderBytes bounds the status line and headers of one answer,
// as on the node's other provider clients: Ollama sends a few hundred
// bytes, and net/http's default (10 MB) would let a broken server or proxy
// cost that much per run.
const maxResponseHeaderBytes = 256 << 10

// newTransport returns the instance's transport. No client-wide Timeout is
// set: a streamed generation may legitimately run for minutes, so limits
// come from the run's context instead.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// The default of 2 idle connections per host would make a busy Node
	// re-dial Ollama for most concurrent runs.
	t.MaxIdleConnsPerHost = 64
	t.MaxResponseHeaderBytes = maxResponseHeaderBytes
	return t
}

// withTimeout bounds ctx by the request's timeout_sec when set, else by the
// config's timeout_sec; zero for both means no adapter-imposed limit.
func withTimeout(ctx context.Context, cfg *config, reqTimeoutSec uint32) (context.Context, context.CancelFunc, time.Duration) {
	d := cfg.timeout
	if reqTimeoutSec > 0 {
		d = time.Duration(reqTimeoutSec) * time.Second
	}
	if d <= 0 {
		ctx, cancel := context.WithCancel(ctx)
		return ctx, cancel, 0
	}
	ctx, cancel := context.WithTimeoutCause(ctx, d, errRunTimeout)
	return ctx, cancel, d
}

// contextError maps a failure that happened while ctx (derived from parent
// by withTimeout) was done: the caller's cancellation is returned wrapped
// as is, the adapter's own deadline becomes a timeout adapter.Error. It
// returns nil when neither context is done.
func contextError(parent, ctx context.Context, limit time.Duration) error {
	if err := parent.Err(); err != nil {
		return fmt.Errorf("ollama: %w", err)
	}
	if errors.Is(context.Cause(ctx), errRunTimeout) {
		return &adapter.Error{
			Code:    adapter.CodeTimeout,
			Message: fmt.Sprintf("ollama did not finish within %s", limit),
			Err:     context.DeadlineExceeded,
		}
	}
	return nil
}

// post sends body as JSON to path under the base URL and returns the
// response when its status is 2xx; the caller closes the body.
func (o *Instance) post(ctx context.Context, cfg *config, path string, body any) (*http.Response, error) {
	buf, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("ollama: encode request: %w", err)
	}
	return o.do(ctx, cfg, http.MethodPost, path, buf)
}

// do performs one request with the configured headers and credentials.
// Non-2xx responses are consumed and returned as *adapter.Error.
func (o *Instance) do(ctx context.Context, cfg *config, method, path string, body []byte) (*http.Response, error) {
	req, release, err := h1client.NewRequest(ctx, method, cfg.baseURL+path, body)
	if err != nil {
		return nil, fmt.Errorf("ollama: build request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, application/x-ndjson")
	for name, values := range cfg.headers {
		req.Header[name] = append([]string(nil), values...)
	}
	if cfg.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.apiKey)
	}
	resp, err := adapter.RoundTrip(o.client, req)
	release()
	if err != nil {
		if ctx.Err() != nil {
			// The caller maps context failures; keep the cause chain.
			return nil, fmt.Errorf("ollama: %s %s: %w", method, path, err)
		}
		return nil, &adapter.Error{
			Code:    adapter.CodeUpstream,
			Message: "ollama is unreachable",
			Err:     err,
		}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, statusError(resp)
	}
	return resp, nil
}

// statusError turns a non-2xx response into an adapter.Error carrying
// Ollama's {"error": "..."} message. It reads the body (the caller closes
// it), draining what follows the message within bounds.
func statusError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	adapter.DrainBody(resp.Body, maxErrorDrain, errorDrainTime)
	code := adapter.CodeUpstream
	if resp.StatusCode == http.StatusBadRequest {
		code = adapter.CodeInvalidRequest
	}
	msg := fmt.Sprintf("ollama returned HTTP %d", resp.StatusCode)
	status := &statusErr{status: resp.StatusCode}
	if c, err := decodeChunk(raw); err == nil {
		if text := c.errorText(); text != "" {
			// Ollama's own error is a string; an object is another
			// server's (llama.cpp's, an OpenAI-shaped proxy's).
			msg, status.ollama = text, bytes.HasPrefix(*c.Error, []byte(`"`))
		}
	}
	ae := &adapter.Error{
		Code:       code,
		Message:    msg,
		HTTPStatus: resp.StatusCode,
		Err:        status,
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		// Ollama answers 503 when its queue (OLLAMA_MAX_QUEUE) is full; it
		// and any proxy in front may say when to come back.
		ae.RetryAfterSec = adapter.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	case http.StatusUnauthorized, http.StatusForbidden:
		// A proxy in front of Ollama refused the node's key; its text would
		// blame the API caller's (it stays in Err for logs).
		ae.Message = adapter.MsgUpstreamCredentials
		ae.Err = fmt.Errorf("ollama: http status %d: %s", resp.StatusCode, msg)
	}
	return ae
}

// statusErr is the Err of a non-2xx answer's adapter.Error. ollama reports
// whether the body was Ollama's own {"error": "..."}: a 404 with it is
// Ollama saying a model does not exist, while a route missing (an old
// server, a proxy) answers 404 with a page.
type statusErr struct {
	status int
	ollama bool
}

func (e *statusErr) Error() string { return fmt.Sprintf("ollama: http status %d", e.status) }
