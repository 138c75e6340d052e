package edgeapp

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/iop-gateway/iop/internal/testredis"
)

// startWarning starts an edge on cfgYAML (password, when set, as if read
// from cluster.redis.password_env) and returns the one warning its start
// logged about Redis, with how long New took.
func startWarning(t *testing.T, cfgYAML, password string) (observer.LoggedEntry, time.Duration) {
	t.Helper()
	_, cfg := edgeFile(t, "listen: {http: '127.0.0.1:0', node: '127.0.0.1:0'}\n"+cfgYAML+oneNodeYAML)
	cfg.Cluster.Redis.Password = password
	core, logs := observer.New(zapcore.WarnLevel)
	began := time.Now()
	e, err := New(cfg, Options{HealthInterval: -1, Logger: zap.New(core)})
	took := time.Since(began)
	if err != nil {
		t.Fatalf("New: %v, want a start", err)
	}
	defer e.Close()
	var warned []observer.LoggedEntry
	for _, l := range logs.All() {
		if _, ok := l.ContextMap()["keys"]; ok {
			warned = append(warned, l)
		}
	}
	if len(warned) != 1 {
		t.Fatalf("log: %v, want one warning naming keys", logs.All())
	}
	return warned[0], took
}

func warnedKeys(l observer.LoggedEntry) []interface{} {
	keys, _ := l.ContextMap()["keys"].([]interface{})
	return keys
}

// A Redis that answers but refuses the edge's password (none given to a
// Redis with requirepass: NOAUTH; a wrong one: WRONGPASS) is no address
// problem: the start's warning names cluster.redis.password_env, and
// neither says Redis does not answer nor tells to start it. It named
// cluster.redis.address with "start Redis at cluster.redis.address".
func TestRedisRefusingThePasswordAtStartNamesPasswordEnv(t *testing.T) {
	s := testredis.Start(t)
	if err := s.Client(t).Do(context.Background(), "CONFIG", "SET", "requirepass", "right-36r").Err(); err != nil {
		t.Fatal(err)
	}
	for name, password := range map[string]string{"none (NOAUTH)": "", "wrong (WRONGPASS)": "wrong-36r"} {
		t.Run(name, func(t *testing.T) {
			l, _ := startWarning(t, "cluster: {redis: {address: '"+s.Addr+"', timeout_ms: 2000}}\n", password)
			if keys := warnedKeys(l); len(keys) != 1 || keys[0] != "cluster.redis.password_env" {
				t.Errorf("warning %q keys %v, want [cluster.redis.password_env]", l.Message, keys)
			}
			fix, _ := l.ContextMap()["fix"].(string)
			if l.Message == redisSilentMsg || fix == "" || fix == redisAddressFix {
				t.Errorf("warning %q, fix %q: says Redis does not answer", l.Message, fix)
			}
			if e, _ := l.ContextMap()["error"].(string); password != "" && strings.Contains(e, password) {
				t.Errorf("the password in the warning: %q", e)
			}
		})
	}
}

// A Redis that takes the connection and never answers (a hostile or hung
// peer) delays the start by timeout_ms at most, and the warning names
// cluster.redis.address.
func TestRedisSilentAtStartIsBoundedByTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 64)
	// Owner: this test; ends when ln is closed at its end.
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case accepted <- c: // held open, never answered
			default:
				_ = c.Close()
			}
		}
	}()
	defer func() {
		for {
			select {
			case c := <-accepted:
				_ = c.Close()
			default:
				return
			}
		}
	}()
	l, took := startWarning(t, "cluster: {redis: {address: '"+ln.Addr().String()+"', timeout_ms: 300}}\n", "")
	if keys := warnedKeys(l); len(keys) != 1 || keys[0] != "cluster.redis.address" || l.Message != redisSilentMsg {
		t.Errorf("warning %q keys %v, want %q naming [cluster.redis.address]", l.Message, keys, redisSilentMsg)
	}
	// The ping takes 300 ms; the rest of New is far less. 20 s would mean
	// a ping not bounded by timeout_ms (go-redis's own would be none).
	if took < 300*time.Millisecond || took > 20*time.Second {
		t.Errorf("New took %v with a silent Redis and timeout_ms 300", took)
	}
}

// A Redis that answers the connection's SELECT with an error (a db
// beyond its databases) refuses the edge: the warning names
// cluster.redis.db beside the address, and does not say Redis does not
// answer.
func TestRedisRefusingTheDBAtStartNamesDB(t *testing.T) {
	s := testredis.Start(t)
	l, _ := startWarning(t, "cluster: {redis: {address: '"+s.Addr+"', db: 99999, timeout_ms: 2000}}\n", "")
	keys := warnedKeys(l)
	if len(keys) != 2 || keys[0] != "cluster.redis.address" || keys[1] != "cluster.redis.db" {
		t.Errorf("warning %q keys %v, want [cluster.redis.address cluster.redis.db]", l.Message, keys)
	}
	if fix, _ := l.ContextMap()["fix"].(string); l.Message == redisSilentMsg || fix == redisAddressFix {
		t.Errorf("warning %q, fix %q: says Redis does not answer", l.Message, fix)
	}
}
