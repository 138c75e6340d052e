package edgeapp

import (
	"net"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// An edge whose Redis does not answer at start still starts (it resumes
// by itself once Redis answers), but says so at once, in one warning
// naming cluster.redis.address: until then every request gets 503
// cluster_unavailable, and the start used to log nothing about it.
func TestRedisUnreachableAtStartNamesTheKey(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close()
	_, cfg := edgeFile(t, "listen: {http: '127.0.0.1:0', node: '127.0.0.1:0'}\n"+
		"cluster: {redis: {address: '"+closed+"', timeout_ms: 2000}}\n"+oneNodeYAML)
	core, logs := observer.New(zapcore.WarnLevel)
	e, err := New(cfg, Options{HealthInterval: -1, Logger: zap.New(core)})
	if err != nil {
		t.Fatalf("New with Redis down: %v, want a start", err)
	}
	defer e.Close()
	warned := logs.FilterMessageSnippet("redis does not answer at start").All()
	if len(warned) != 1 {
		t.Fatalf("log: %v, want one warning", logs.All())
	}
	keys, _ := warned[0].ContextMap()["keys"].([]interface{})
	if len(keys) != 1 || keys[0] != "cluster.redis.address" {
		t.Errorf("warning's keys %v, want [cluster.redis.address]", warned[0].ContextMap()["keys"])
	}
}
