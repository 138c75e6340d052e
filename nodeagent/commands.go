package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

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
		payload = a.transport()
	case CmdProviders:
		resp.Providers = a.Snapshots(ctx)
		payload = map[string]any{"providers": resp.Providers}
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
	Adapter string   `json:"adapter"`
	Type    string   `json:"type"`
	Models  []string `json:"models"`
	Error   string   `json:"error,omitempty"`
}

func (a *Agent) capabilities(ctx context.Context) map[string]any {
	out := []adapterCaps{}
	for _, in := range a.snapshotInstances() {
		c := adapterCaps{Adapter: in.name, Type: in.cfg.Load().GetType(), Models: []string{}}
		if ml, ok := in.impl.(adapter.ModelLister); ok {
			models, err := ml.Models(ctx)
			if err != nil {
				c.Error = err.Error()
			} else {
				c.Models = models
			}
		}
		out = append(out, c)
	}
	return map[string]any{"adapter_types": a.AdapterTypes(), "adapters": out}
}

func (a *Agent) sessions() map[string]any {
	out := []adapter.SessionInfo{}
	for _, in := range a.snapshotInstances() {
		if sm, ok := in.impl.(adapter.SessionManager); ok {
			out = append(out, sm.Sessions()...)
		}
	}
	return map[string]any{"sessions": out}
}

func (a *Agent) transport() map[string]any {
	c := a.conn.Load()
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
			h := hr.Health(ctx)
			if h.Status != adapter.HealthUnknown {
				s.Health = h.Status
			}
			if h.Status == adapter.HealthOffline {
				s.Status = "unavailable"
			}
			s.BackendRunning, s.BackendWaiting, s.KvCacheUsage = h.Running, h.Waiting, h.KVCacheUsage
		}
		out = append(out, s)
	}
	return out
}
