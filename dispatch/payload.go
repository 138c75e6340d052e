package dispatch

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/iop-gateway/iop/config"
	iop "github.com/iop-gateway/iop/proto/gen/iop"
)

// NodePayload builds the NodeConfigPayload the Edge hands a Node: its
// providers as adapter configs and its heartbeat settings. Secrets are not
// in it: api_key_env names a Node-local variable.
func NodePayload(spec *config.NodeSpec) *iop.NodeConfigPayload {
	p := &iop.NodeConfigPayload{
		Runtime: &iop.NodeRuntimeConfig{LoadReportIntervalMs: uint32(spec.LoadReportInterval() / time.Millisecond)},
		Heartbeat: &iop.HeartbeatConfig{
			IntervalMs: uint32(spec.HeartbeatIntervalSec * float64(time.Second/time.Millisecond)),
			TimeoutMs:  uint32(spec.HeartbeatTimeoutSec * float64(time.Second/time.Millisecond)),
		},
	}
	for _, pr := range spec.Providers {
		p.Adapters = append(p.Adapters, &iop.AdapterConfig{
			Name:         pr.Name,
			Type:         pr.Type,
			Category:     pr.Category,
			Capacity:     int32(pr.Capacity),
			LongCapacity: int32(pr.LongCapacity),
			BaseUrl:      pr.BaseURL,
			ApiKeyEnv:    pr.APIKeyEnv,
			TimeoutSec:   int32(pr.TimeoutSec),
			ToolMode:     pr.WireToolMode(),
			Command:      pr.Command,
			Headers:      pr.Headers,
			Settings:     pr.Settings(),
		})
		p.Runtime.Concurrency += int32(pr.Capacity) // legacy metadata only
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	sum := sha256.Sum256(b)
	p.ConfigVersion = hex.EncodeToString(sum[:8])
	return p
}
