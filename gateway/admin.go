package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/gateway/openaiapi"
)

// adminTimeout bounds node round trips made by admin endpoints.
const adminTimeout = 15 * time.Second

// ReloadReport is the answer of POST /admin/reload.
type ReloadReport struct {
	// Nodes maps each affected ready node to its refresh result: applied,
	// restart_required, failed, or "error: …" when it could not be reached.
	Nodes map[string]string `json:"nodes"`
}

func adminError(c *gin.Context, status int, code, msg string) {
	writeError(c, &openaiapi.Error{Status: status, Type: openaiapi.TypeInvalidRequest, Code: code, Message: msg})
}

func (s *Server) adminStatus(c *gin.Context) {
	c.JSON(http.StatusOK, s.d.Status())
}

func (s *Server) adminReload(c *gin.Context) {
	if s.reload == nil {
		adminError(c, http.StatusNotImplemented, "reload_unavailable", "This edge was started without a config file to reload.")
		return
	}
	rep, err := s.reload()
	if err != nil {
		adminError(c, http.StatusBadRequest, "invalid_config", err.Error())
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "reloaded", "nodes": rep.Nodes})
}

func (s *Server) nodeError(c *gin.Context, err error) {
	switch {
	case errors.Is(err, dispatch.ErrUnknownNode):
		adminError(c, http.StatusNotFound, "node_not_found", err.Error())
	case errors.Is(err, dispatch.ErrNodeNotReady):
		adminError(c, http.StatusConflict, "node_not_ready", err.Error())
	default:
		adminError(c, http.StatusBadGateway, "node_error", err.Error())
	}
}

func (s *Server) adminRefresh(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), adminTimeout)
	defer cancel()
	resp, err := s.d.RefreshNode(ctx, c.Param("id"))
	if err != nil {
		s.nodeError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"node": c.Param("id"), "status": dispatch.RefreshResult(resp, nil), "reason": resp.GetReason()})
}

var commandTypes = []string{"usage", "capabilities", "sessions", "transport", "providers"}

func (s *Server) adminCommand(c *gin.Context) {
	typ := c.Param("type")
	if !slices.Contains(commandTypes, typ) {
		adminError(c, http.StatusNotFound, "unknown_command", "unknown command "+typ+"; want one of usage, capabilities, sessions, transport, providers")
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), adminTimeout)
	defer cancel()
	resp, err := s.d.NodeCommand(ctx, c.Param("id"), typ)
	if err != nil {
		s.nodeError(c, err)
		return
	}
	if resp.GetError() != "" {
		adminError(c, http.StatusBadGateway, "command_failed", resp.GetError())
		return
	}
	c.JSON(http.StatusOK, gin.H{"node": c.Param("id"), "type": typ, "result": json.RawMessage(orEmpty(resp.GetPayloadJson()))})
}

func orEmpty(b []byte) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}

func (s *Server) adminTerminate(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), adminTimeout)
	defer cancel()
	n, err := s.d.TerminateSession(ctx, c.Param("session_id"))
	s.metrics.cancelled(CancelAdmin)
	out := gin.H{"session_id": c.Param("session_id"), "nodes_reached": n}
	if err != nil {
		out["error"] = err.Error()
	}
	c.JSON(http.StatusOK, out)
}
