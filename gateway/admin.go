package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/iop-gateway/iop/dispatch"
	"github.com/iop-gateway/iop/gateway/openaiapi"
)

// defaultAdminTimeout bounds node round trips made by admin endpoints.
const defaultAdminTimeout = 15 * time.Second

// adminTimeout is the bound in force: defaultAdminTimeout, unless a test
// set a shorter one (its silent-node test need not wait out 15 s to see
// the same 504).
func (s *Server) adminTimeout() time.Duration {
	if d := time.Duration(s.adminWait.Load()); d > 0 {
		return d
	}
	return defaultAdminTimeout
}

// ReloadReport is the answer of POST /admin/reload.
type ReloadReport struct {
	// Nodes maps each affected ready node to its refresh result: applied,
	// restart_required, failed, or "error: <code>" when it could not be
	// reached (the answer shows only the code: see refreshShown).
	Nodes map[string]string `json:"nodes"`
	// RestartRequired names changed keys this edge applies only at start
	// (listen.*, log, tracing, runtime, cluster, the HTTP server's header
	// and idle timeouts); they keep their running values until a restart.
	RestartRequired []string `json:"restart_required,omitempty"`
}

func adminError(c *gin.Context, status int, code, msg string) {
	writeError(c, &openaiapi.Error{Status: status, Type: openaiapi.TypeInvalidRequest, Code: code, Message: msg})
}

func (s *Server) adminStatus(c *gin.Context) {
	st := s.d.Status()
	st.Cluster = s.d.Cluster(c.Request.Context())
	// Arrays even when the config lists none: scripts iterate them.
	if st.Nodes == nil {
		st.Nodes = []dispatch.NodeStatus{}
	}
	if st.Models == nil {
		st.Models = []dispatch.ModelStatus{}
	}
	c.JSON(http.StatusOK, st)
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
	nodes := make(map[string]string, len(rep.Nodes))
	for id, result := range rep.Nodes {
		nodes[id] = refreshShown(result)
		if nodes[id] != result {
			s.log.Warn("config refresh failed", zap.String("request_id", info(c).requestID), zap.String("node_id", id), zap.String("result", result))
		}
	}
	out := gin.H{"status": "reloaded", "nodes": nodes}
	if len(rep.RestartRequired) > 0 {
		out["restart_required"] = rep.RestartRequired
	}
	c.JSON(http.StatusOK, out)
}

// refreshShown is a node's refresh result as /admin/reload shows it:
// applied, restart_required, failed, or "error: <code>" with a code of
// dispatch.NodeErrorCode. Any other text (a transport error's, which can
// name addresses, ports and OS errors) becomes "error: node_error"; the
// caller logs it.
func refreshShown(result string) string {
	switch result {
	case "applied", "restart_required", "failed":
		return result
	}
	if code, ok := strings.CutPrefix(result, "error: "); ok && nodeErrorCodes[code] {
		return result
	}
	return "error: " + dispatch.CodeNodeError
}

var nodeErrorCodes = map[string]bool{
	dispatch.CodeNodeNotFound: true, dispatch.CodeNodeNotReady: true, dispatch.CodeNodeLost: true,
	dispatch.CodeTimeout: true, dispatch.CodeCancelled: true, dispatch.CodeProtocol: true, dispatch.CodeNodeError: true,
}

// nodeError answers a failed node round trip with a code and a fixed
// message; the error itself (transport text, addresses) is only logged.
func (s *Server) nodeError(c *gin.Context, op string, err error) {
	code := dispatch.NodeErrorCode(err)
	fields := []zap.Field{zap.String("request_id", info(c).requestID), zap.String("node_id", c.Param("id")),
		zap.String("op", op), zap.String("code", code)}
	if code == dispatch.CodeCancelled {
		// The admin client went away: nothing to answer, nothing wrong.
		s.log.Debug("admin node request abandoned", fields...)
		c.Abort()
		return
	}
	if code == dispatch.CodeNodeNotFound || code == dispatch.CodeNodeNotReady {
		s.log.Info("admin node request refused", append(fields, zap.Error(err))...)
	} else {
		s.log.Warn("admin node request failed", append(fields, zap.Error(err))...)
	}
	switch code {
	case dispatch.CodeNodeNotFound:
		adminError(c, http.StatusNotFound, code, "No node with this id is configured.")
	case dispatch.CodeNodeNotReady:
		adminError(c, http.StatusConflict, code, "The node is not connected and ready.")
	case dispatch.CodeTimeout:
		adminError(c, http.StatusGatewayTimeout, code, "The node did not answer in time.")
	case dispatch.CodeNodeLost:
		adminError(c, http.StatusBadGateway, code, "The connection to the node was lost before it answered.")
	case dispatch.CodeProtocol:
		adminError(c, http.StatusBadGateway, code, "The node answered out of protocol.")
	default:
		adminError(c, http.StatusBadGateway, dispatch.CodeNodeError, "The node request failed.")
	}
}

func (s *Server) adminRefresh(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.adminTimeout())
	defer cancel()
	resp, err := s.d.RefreshNode(ctx, c.Param("id"))
	if err != nil {
		s.nodeError(c, "refresh", err)
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
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.adminTimeout())
	defer cancel()
	resp, err := s.d.NodeCommand(ctx, c.Param("id"), typ)
	if err != nil {
		s.nodeError(c, "command "+typ, err)
		return
	}
	if resp.GetError() != "" {
		adminError(c, http.StatusBadGateway, "command_failed", resp.GetError())
		return
	}
	result := orEmpty(resp.GetPayloadJson())
	if !json.Valid(result) {
		// Rendering it would fail after the 200 went out: an empty answer.
		adminError(c, http.StatusBadGateway, "command_failed", "The node's answer is not JSON.")
		return
	}
	c.JSON(http.StatusOK, gin.H{"node": c.Param("id"), "type": typ, "result": json.RawMessage(result)})
}

func orEmpty(b []byte) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}

func (s *Server) adminTerminate(c *gin.Context) {
	// Only an id a request could have named (X-IOP-Session-Id's rule): any
	// other cannot be a session, and one that is not UTF-8 cannot even be
	// sent (it failed to encode, reported as every node lost).
	if id := c.Param("session_id"); id == "" || !validSessionID(id) {
		writeError(c, openaiapi.InvalidRequest("The session id must be 1 to 256 printable UTF-8 characters.", ""))
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.adminTimeout())
	defer cancel()
	n, err := s.d.TerminateSession(ctx, c.Param("session_id"))
	if n > 0 {
		// Asked of at least one node; the answer does not say whether the
		// session ran there, so this counts cancellations sent.
		s.metrics.cancelled(CancelAdmin)
	}
	out := gin.H{"session_id": c.Param("session_id"), "nodes_reached": n}
	if err != nil {
		// The code only: the error's text can name node addresses.
		out["error"] = dispatch.NodeErrorCode(err)
		s.log.Warn("terminate session: not every node was reached", zap.String("request_id", info(c).requestID),
			zap.Int("nodes_reached", n), zap.Error(err))
	}
	c.JSON(http.StatusOK, out)
}
