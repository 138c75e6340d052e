package dispatch

import (
	"sync/atomic"
	"time"
)

// Event types published on the bus.
const (
	EventNodeConnected    = "node.connected"
	EventNodeDisconnected = "node.disconnected"
	EventNodeSuperseded   = "node.superseded"
	// EventNodeRejected: a registration was refused (bad token, unknown
	// id, protocol version); NodeID is set only for a configured node.
	EventNodeRejected = "node.rejected"
)

// Event is a node lifecycle notification. Events are informational: no
// correctness transition (lease return, fencing, queue settlement) depends
// on one being delivered.
type Event struct {
	Type   string    `json:"type"`
	NodeID string    `json:"node_id"`
	Reason string    `json:"reason,omitempty"`
	Time   time.Time `json:"time"`
	// Count, in RecentEvents, is how many refused registrations of the
	// same node and reason the entry stands for when more than one; Time
	// is then the latest. Zero on the bus.
	Count int `json:"count,omitempty"`
}

// Bus receives events. Publish must never block: a full bus drops.
type Bus interface {
	Publish(Event)
}

// ChanBus is a bounded, dropping bus backed by a channel.
type ChanBus struct {
	ch      chan Event
	dropped atomic.Uint64
}

// NewChanBus returns a bus holding at most size undelivered events.
func NewChanBus(size int) *ChanBus { return &ChanBus{ch: make(chan Event, size)} }

// Publish enqueues e or drops it when the bus is full.
func (b *ChanBus) Publish(e Event) {
	select {
	case b.ch <- e:
	default:
		b.dropped.Add(1)
	}
}

// Events is the receive side.
func (b *ChanBus) Events() <-chan Event { return b.ch }

// Dropped counts events lost to a full bus.
func (b *ChanBus) Dropped() uint64 { return b.dropped.Load() }

type nopBus struct{}

func (nopBus) Publish(Event) {}
