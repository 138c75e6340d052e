package nodeagent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/iop-gateway/iop/internal/healthname"
	"github.com/iop-gateway/iop/nodeagent/adapter"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// Command types (NodeCommandRequest.type).
const (
	CmdUsage        = "usage"
	CmdCapabilities = "capabilities"
	CmdSessions     = "sessions"
	CmdTransport    = "transport"
	CmdProviders    = "providers"
)

// commandTimeout bounds backend queries a command makes (model lists,
// health).
const commandTimeout = 5 * time.Second

// Bounds on an answer's lists, so that it always fits one frame
// (nodewire.DefaultMaxFrameSize) whatever a backend lists or however many
// CLI sessions have piled up: an answer over the frame limit would not be
// sent at all. A list cut short is marked (truncated, with the total).
const (
	maxCommandSessions = 1000
	maxCommandModels   = 1000 // per adapter
	maxModelIDLen      = 256  // longer ids are left out
)

// Command answers a non-execution query. Unknown types answer an error in
// the response, never a failed stream.
func (a *Agent) Command(ctx context.Context, typ string) *iop.NodeCommandResponse {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	resp := &iop.NodeCommandResponse{Type: typ}
	var payload any
	switch typ {
	case CmdUsage:
		payload = a.usage()
	case CmdCapabilities:
		payload = a.capabilities(ctx)
	case CmdSessions:
		payload = a.sessions()
	case CmdTransport:
		payload = transport(ctx)
	case CmdProviders:
		resp.Providers = a.Snapshots(ctx)
		payload = map[string]any{"providers": providerViews(resp.Providers)}
	default:
		resp.Error = fmt.Sprintf("unknown command %q (want usage, capabilities, sessions, transport or providers)", typ)
		return resp
	}
	b, err := json.Marshal(payload)
	if err != nil {
		resp.Error = "encode: " + err.Error()
		return resp
	}
	resp.PayloadJson = b
	return resp
}

// providerView is a snapshot as the providers command's JSON shows it:
// health by name, as /admin/status shows it (healthname), not the enum's
// number. The edge reads health from the answer's Providers field, never
// from this JSON (it relays it to the admin API as it is), so edges of
// any version read the same answer.
type providerView struct {
	*iop.ProviderSnapshot
	Health string `json:"health"` // shadows the embedded enum
}

func providerViews(snaps []*iop.ProviderSnapshot) []providerView {
	out := make([]providerView, 0, len(snaps))
	for _, s := range snaps {
		out = append(out, providerView{ProviderSnapshot: s, Health: healthname.Of(s.GetHealth())})
	}
	return out
}

type adapterUsage struct {
	Adapter          string `json:"adapter"`
	Type             string `json:"type"`
	Requests         int64  `json:"requests"`
	Errors           int64  `json:"errors"`
	Rejected         int64  `json:"rejected_over_capacity"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
}

func (a *Agent) usage() map[string]any {
	out := []adapterUsage{}
	for _, in := range a.snapshotInstances() {
		out = append(out, adapterUsage{
			Adapter: in.name, Type: in.cfg.Load().GetType(),
			Requests: in.stats.requests.Load(), Errors: in.stats.errors.Load(), Rejected: in.stats.rejected.Load(),
			PromptTokens: in.stats.promptTokens.Load(), CompletionTokens: in.stats.completionTokens.Load(),
		})
	}
	return map[string]any{"adapters": out}
}

type adapterCaps struct {
	Adapter         string   `json:"adapter"`
	Type            string   `json:"type"`
	Models          []string `json:"models"`
	ModelsTruncated bool     `json:"models_truncated,omitempty"`
	Error           string   `json:"error,omitempty"`
}

func (a *Agent) capabilities(ctx context.Context) map[string]any {
	out := []adapterCaps{}
	for _, in := range a.snapshotInstances() {
		c := adapterCaps{Adapter: in.name, Type: in.cfg.Load().GetType(), Models: []string{}}
		if ml, ok := in.impl.(adapter.ModelLister); ok {
			models, err := query(a.log, in.name, func() ([]string, error) { return ml.Models(ctx) })
			if err != nil {
				c.Error = a.commandError(ctx, in.name, err)
			} else {
				c.Models, c.ModelsTruncated = boundModels(models)
			}
		}
		out = append(out, c)
	}
	return map[string]any{"adapter_types": a.AdapterTypes(), "adapters": out}
}

// commandError is what an answer says of an adapter's failure: its
// caller-safe message (adapter.Error.Message), never the cause, which can
// carry an upstream's own words (a rejected key quoted back) or transport
// text naming addresses. The cause goes to the node's log.
func (a *Agent) commandError(ctx context.Context, name string, err error) string {
	if ctx.Err() == nil {
		a.log.Warn("adapter query failed", zap.String("adapter", name), zap.Error(err))
	}
	var ae *adapter.Error
	if errors.As(err, &ae) && ae.Message != "" {
		return adapter.CodeName(ae.Code) + ": " + ae.Message
	}
	if ctx.Err() != nil {
		return "timed out"
	}
	return "failed"
}

// boundModels keeps at most maxCommandModels ids of at most maxModelIDLen
// bytes, reporting whether any was left out.
func boundModels(models []string) ([]string, bool) {
	out := make([]string, 0, min(len(models), maxCommandModels))
	for _, m := range models {
		if len(m) <= maxModelIDLen && len(out) < maxCommandModels {
			out = append(out, m)
		}
	}
	return out, len(out) < len(models)
}

func (a *Agent) sessions() map[string]any {
	out := []adapter.SessionInfo{}
	for _, in := range a.snapshotInstances() {
		if sm, ok := in.impl.(adapter.SessionManager); ok {
			ss, err := query(a.log, in.name, func() ([]adapter.SessionInfo, error) { return sm.Sessions(), nil })
			if err == nil {
				out = append(out, ss...)
			}
		}
	}
	if len(out) <= maxCommandSessions {
		return map[string]any{"sessions": out}
	}
	// Keep the running sessions, then the most recently used.
	total := len(out)
	slices.SortStableFunc(out, func(x, y adapter.SessionInfo) int {
		if c := cmp.Compare(y.Running, x.Running); c != 0 {
			return c
		}
		return cmp.Compare(y.LastUsedUnix, x.LastUsedUnix)
	})
	return map[string]any{"sessions": out[:maxCommandSessions], "truncated": true, "total": total}
}

// transport describes the connection of the session the command came on
// (a node with several edges has one each).
func transport(ctx context.Context) map[string]any {
	c := sessionConn(ctx)
	if c == nil {
		return map[string]any{"connected": false}
	}
	return map[string]any{"connected": true, "stats": c.Stats()}
}

// Snapshots reports each instance's local state: gate occupancy and backend
// health. queued figures are the Edge's; the Node has no queue.
func (a *Agent) Snapshots(ctx context.Context) []*iop.ProviderSnapshot {
	a.mu.RLock()
	nodeID := a.nodeID
	a.mu.RUnlock()
	var out []*iop.ProviderSnapshot
	for _, in := range a.snapshotInstances() {
		capacity, inFlight := in.gate.state()
		s := &iop.ProviderSnapshot{
			NodeId: nodeID, ProviderId: in.name, Type: in.cfg.Load().GetType(), Category: in.category(),
			Status: "available", Health: adapter.HealthOK,
			Capacity: int32(capacity), LongCapacity: in.cfg.Load().GetLongCapacity(), InFlight: int32(inFlight),
		}
		if hr, ok := in.impl.(adapter.HealthReporter); ok {
			h := in.health(ctx, hr, a.log)
			if h.Status != adapter.HealthUnknown {
				s.Health = h.Status
			}
			if h.Status == adapter.HealthOffline {
				s.Status = "unavailable"
			}
			s.BackendRunning, s.BackendWaiting, s.KvCacheUsage = h.Running, h.Waiting, h.KVCacheUsage
		}
		if a.Draining() {
			// Edges that poll rather than take load reports see it here.
			s.Status, s.Health = "draining", iop.HealthState_HEALTH_STATE_DRAINING
		}
		out = append(out, s)
	}
	return out
}
