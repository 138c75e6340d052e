package gateway

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/gateway/openaiapi"
)

// apiError maps any error of a request to the OpenAI envelope. It is the one
// place that decides statuses and codes.
func apiError(err error, model string) *openaiapi.Error {
	var ae *openaiapi.Error
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, dispatch.ErrModelNotFound):
		return openaiapi.ModelNotFound(model)
	case errors.Is(err, dispatch.ErrQueueFull):
		return openaiapi.QueueFull(model, 1)
	case errors.Is(err, dispatch.ErrNoCapableProvider):
		return openaiapi.InvalidRequest("Model '"+model+"' has no provider that can serve this request (it needs an OpenAI-compatible provider: /v1/responses, several choices or prompts).", "model")
	case errors.Is(err, dispatch.ErrClusterUnavailable):
		return openaiapi.ClusterUnavailable()
	case errors.Is(err, dispatch.ErrQueueTimeout):
		return openaiapi.QueueTimeout(model)
	case errors.Is(err, dispatch.ErrNoProvider), errors.Is(err, dispatch.ErrDispatcherShutdown):
		return openaiapi.NoProviderAvailable(model)
	case errors.Is(err, dispatch.ErrInvalidRequest):
		return openaiapi.InvalidRequest("The request contains text that is not valid UTF-8.", "")
	case errors.Is(err, dispatch.ErrNodeLost), errors.Is(err, dispatch.ErrLeaseReleased):
		return openaiapi.UpstreamError("The provider's node was lost before it answered.")
	case errors.Is(err, context.DeadlineExceeded):
		return openaiapi.UpstreamError("The provider did not answer in time.")
	default:
		return openaiapi.UpstreamError("The provider request failed.")
	}
}

// writeError renders e as the response (only before anything was written).
// A request whose body is still unread closes its connection after the
// answer (see deadlineBody.abandon).
func writeError(c *gin.Context, e *openaiapi.Error) {
	abandonBody(c)
	if e.RetryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	c.Data(e.Status, "application/json", e.Envelope())
	c.Abort()
}

// abandonBody closes the connection after the answer when the request's
// body is still unread, and has readDeadline linger once the request is
// logged (deadlineBody.abandon). Call it before writing an early answer:
// left open, net/http would read on into the body before it writes one.
func abandonBody(c *gin.Context) {
	if in, ok := lookupInfo(c); ok {
		if b := in.body; b != nil && b.abandon(c) {
			in.linger = true
		}
	}
}

// unsupportedCoding is the answer to a request body sent with a content
// coding (bodyLimit): 415, with Accept-Encoding: identity (RFC 9110
// §15.5.16), and the invalid_request code of any request the edge cannot
// take as sent.
func unsupportedCoding() *openaiapi.Error {
	return &openaiapi.Error{Status: http.StatusUnsupportedMediaType, Type: openaiapi.TypeInvalidRequest, Code: openaiapi.CodeInvalidRequest,
		Message: "Compressed request bodies are not supported (Content-Encoding); send the body uncompressed."}
}
