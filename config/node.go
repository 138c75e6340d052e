package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Node is the iop-node configuration (CONTRACT §4).
type Node struct {
	Edge      NodeEdge      `mapstructure:"edge"`
	Node      NodeIdentity  `mapstructure:"node"`
	Reconnect NodeReconnect `mapstructure:"reconnect"`
	// StoreDir is node-local state; never sent over the wire.
	StoreDir string `mapstructure:"store_dir"`
	// WorkspaceRoot: cli runs execute only below this directory.
	WorkspaceRoot string       `mapstructure:"workspace_root"`
	Log           Log          `mapstructure:"log"`
	Tracing       Tracing      `mapstructure:"tracing"`
	Runtime       Runtime      `mapstructure:"runtime"`
	Shutdown      NodeShutdown `mapstructure:"shutdown"`
}

// NodeShutdown is what the node does on SIGINT/SIGTERM.
type NodeShutdown struct {
	// DrainSec bounds the drain: the node takes no new work, tells its
	// edges its providers are draining and lets the runs and tunnels in
	// flight finish, for at most this long, then stops. Omitted: 10. 0:
	// no drain (work in flight is cut at once). Negative: a config error.
	DrainSec *float64 `mapstructure:"drain_sec"`
}

// DefaultDrainSec is shutdown.drain_sec when omitted: as long as the
// edge's own drain of requests in flight.
const DefaultDrainSec = 10

// Drain is shutdown.drain_sec as a duration (valid after Normalize).
func (s *NodeShutdown) Drain() time.Duration {
	if s.DrainSec == nil {
		return DefaultDrainSec * time.Second
	}
	return time.Duration(*s.DrainSec * float64(time.Second))
}

// NodeEdge says where the Edge is: one edge (address), or every edge of a
// cluster (addresses), each of which the node keeps its own session with.
type NodeEdge struct {
	Address string `mapstructure:"address"`
	// Addresses lists host:port of every edge. An entry whose host is a
	// DNS name stands for every address the name resolves to: its IPv4
	// addresses when it has any, else its IPv6 ones (one session per edge,
	// not one per address family). A name that does not resolve is looked
	// up again every reconnect interval, each lookup counting as an
	// attempt; once resolved, the name is looked up again whenever none of
	// its sessions is ready (a lost session, a failed attempt), so an edge
	// that moves to a new address is followed. Entries are compared as
	// EdgeAddressKey spells them (ports as numbers, names without case or
	// trailing dot): one listed twice is a config error. Set address or
	// addresses, not both.
	Addresses []string  `mapstructure:"addresses"`
	TLS       ClientTLS `mapstructure:"tls"`
}

// Targets are the configured edge addresses.
func (e *NodeEdge) Targets() []string {
	if len(e.Addresses) > 0 {
		return e.Addresses
	}
	return []string{e.Address}
}

// ClientTLS configures TLS towards the Edge.
type ClientTLS struct {
	Enabled bool `mapstructure:"enabled"`
	// CAFile verifies the Edge; empty means the system roots.
	CAFile     string `mapstructure:"ca_file"`
	ServerName string `mapstructure:"server_name"`
	// CertFile/KeyFile present a client certificate (mutual TLS).
	CertFile string `mapstructure:"cert_file"`
	KeyFile  string `mapstructure:"key_file"`
}

// NodeIdentity is who the Node claims to be.
type NodeIdentity struct {
	ID       string `mapstructure:"id"`
	Token    string `mapstructure:"token"`
	TokenEnv string `mapstructure:"token_env"`
}

// NodeReconnect is the one policy for the initial connect and reconnects.
type NodeReconnect struct {
	// IntervalSec between attempts. Omitted: 10. Must be > 0.
	IntervalSec *float64 `mapstructure:"interval_sec"`
	// MaxAttempts of consecutive failed attempts. Omitted: 10. 0: unlimited
	// until local shutdown. Negative: a config error.
	MaxAttempts *int `mapstructure:"max_attempts"`
}

// Reconnect defaults (seed contract).
const (
	DefaultReconnectIntervalSec = 10
	DefaultReconnectMaxAttempts = 10
)

// LoadNode reads, defaults and validates a node config file.
func LoadNode(file string) (*Node, error) { return loadNormalized[Node](file) }

// Normalize applies defaults and validates, reporting every problem.
func (c *Node) Normalize() error {
	var p problems
	switch {
	case c.Edge.Address == "" && len(c.Edge.Addresses) == 0:
		p.add("edge.address (or edge.addresses) is required")
	case c.Edge.Address != "" && len(c.Edge.Addresses) > 0:
		p.add("edge.address and edge.addresses are both set; set one")
	case c.Edge.Address != "":
		checkHostPort(&p, "edge.address", c.Edge.Address, dialAddr)
	}
	// Entries are compared as the node compares them (EdgeAddressKey):
	// 10.0.0.1:07000, EDGE.:7000 and edge:7000 each repeat an earlier
	// 10.0.0.1:7000 or edge:7000, which the node would serve once.
	seen := map[string]int{}
	for i, a := range c.Edge.Addresses {
		checkHostPort(&p, fmt.Sprintf("edge.addresses[%d]", i), a, dialAddr)
		key := EdgeAddressKey(a)
		if first, ok := seen[key]; ok {
			p.add("edge.addresses[%d] %s is listed twice (as edge.addresses[%d] %s)", i, quoteSafe(a), first, quoteSafe(c.Edge.Addresses[first]))
			continue
		}
		seen[key] = i
	}
	if (c.Edge.TLS.CertFile == "") != (c.Edge.TLS.KeyFile == "") {
		p.add("edge.tls: cert_file and key_file must be set together")
	}
	if t := c.Edge.TLS; !t.Enabled && (t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "") {
		// Most likely TLS was meant: the node would dial in plain TCP.
		p.add("edge.tls: files or server_name are set but enabled is false")
	}
	if c.Node.ID == "" {
		p.add("node.id is required")
	} else if bad := checkName(c.Node.ID, MaxNodeIDBytes); bad != "" {
		p.add("node.id %s", bad)
	}
	c.Node.Token = resolveSecret(&p, "node.token", c.Node.Token, c.Node.TokenEnv)
	if c.Node.Token == "" && c.Node.TokenEnv == "" {
		p.add("node.token (or node.token_env) is required")
	}
	if c.Reconnect.IntervalSec == nil {
		v := float64(DefaultReconnectIntervalSec)
		c.Reconnect.IntervalSec = &v
	} else if *c.Reconnect.IntervalSec <= 0 {
		p.add("reconnect.interval_sec must be > 0 (omit it for the default %d)", DefaultReconnectIntervalSec)
	} else {
		checkMaxSeconds(&p, "reconnect.interval_sec", *c.Reconnect.IntervalSec)
	}
	if c.Reconnect.MaxAttempts == nil {
		v := DefaultReconnectMaxAttempts
		c.Reconnect.MaxAttempts = &v
	} else if *c.Reconnect.MaxAttempts < 0 {
		p.add("reconnect.max_attempts must not be negative (0 means unlimited)")
	}
	if c.Shutdown.DrainSec == nil {
		v := float64(DefaultDrainSec)
		c.Shutdown.DrainSec = &v
	} else if *c.Shutdown.DrainSec < 0 {
		p.add("shutdown.drain_sec must not be negative (0 means no drain)")
	} else {
		checkMaxSeconds(&p, "shutdown.drain_sec", *c.Shutdown.DrainSec)
	}
	if c.StoreDir == "" {
		c.StoreDir = "./var/node"
	}
	if c.WorkspaceRoot == "" {
		c.WorkspaceRoot = "./var/workspaces"
	}
	c.Log.normalize(&p)
	c.Tracing.normalize(&p)
	c.Runtime.normalize(&p)
	return p.err("")
}

// localRelPath reports whether p is relative and stays below its base.
func localRelPath(p string) bool {
	return !filepath.IsAbs(p) && filepath.IsLocal(p) && !strings.Contains(p, "\\")
}
