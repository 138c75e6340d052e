package gateway

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/iop-gateway/iop/dispatch"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Failover before the first byte (models[].max_attempts). An exchange
// that fails before anything reached the client, for a reason that says
// the provider rather than the request is at fault, asks failover for
// another candidate instead of answering. Failover only ever hands over a
// lease it already holds (a candidate with room now, never one the
// request failed on, never by queueing again), so when it says no the
// exchange answers its own failure as it always did; the failed
// attempt's lease is released by its exchange, once, like any other.

// Failover reasons (iop_failovers_total{reason}).
const (
	failoverNodeLost    = "node_lost"   // the node's connection failed
	failoverUnavailable = "unavailable" // the backend answered 502/503/504 or could not be reached
	failoverCapacity    = "at_capacity" // the node's own capacity gate refused
)

// failoverReasons are every reason of iop_failovers_total.
var failoverReasons = []string{failoverNodeLost, failoverUnavailable, failoverCapacity}

// failover takes a lease on another candidate for k after its attempt on
// lease failed for why, and leaves it in k.next. It reports whether it did.
func (s *Server) failover(c *gin.Context, k *call, lease *dispatch.Lease, why string) bool {
	if c.Request.Context().Err() != nil || k.attempt >= lease.MaxAttempts {
		return false
	}
	avoid := append(k.avoid, dispatch.ProviderRef{Node: lease.NodeID, Provider: lease.ProviderID})
	next, err := s.d.Acquire(c.Request.Context(), dispatch.Request{
		Model: k.model, PromptTokens: k.tokens, SessionID: lease.SessionID, NeedsTunnel: needsTunnel(k),
		Prompt: k.prompt, Avoid: avoid, NoWait: true, PreviousResponseID: previousResponseID(k),
	})
	if err != nil {
		return false
	}
	k.avoid, k.next = avoid, next
	s.metrics.failover(k.model, why)
	s.log.Info("failing over", zap.String("request_id", info(c).requestID), zap.String("node_id", lease.NodeID),
		zap.String("provider", lease.ProviderID), zap.String("reason", why), zap.Int("attempt", k.attempt))
	return true
}

// failoverErr is failover for an exchange whose node stream failed before
// the first byte with err: only a node failure qualifies (not a timeout,
// not a cancellation: cs is empty, the client is there; not a request the
// edge could not encode, which every candidate would refuse alike).
func (s *Server) failoverErr(c *gin.Context, k *call, lease *dispatch.Lease, cs *cancelState, err error) bool {
	if cs.get() != "" || errors.Is(err, dispatch.ErrRecvTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, dispatch.ErrInvalidRequest) {
		return false
	}
	why := failoverNodeLost
	var te tunnelError
	if errors.As(err, &te) {
		if why = retryableRun(te.re); why == "" {
			return false
		}
	}
	return s.failover(c, k, lease, why)
}

// retryableRun reports why a run or tunnel ERROR (frame or event) that
// came before the first byte may go to another candidate, or "".
func retryableRun(re *iop.RunError) string {
	switch re.GetCode() {
	case iop.ErrorCode_ERROR_CODE_CAPACITY_EXCEEDED:
		return failoverCapacity
	case iop.ErrorCode_ERROR_CODE_UPSTREAM:
		if retryableStatus(int(re.GetHttpStatus())) || re.GetHttpStatus() == 0 {
			return failoverUnavailable
		}
	}
	return ""
}

// retryableStatus: the backend itself says it cannot serve now.
func retryableStatus(code int) bool {
	return code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}
