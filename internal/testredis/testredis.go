// Package testredis runs a real redis-server (Debian's package) on a
// loopback port for tests. Without the binary a test is skipped, except
// under CI (CI set), where .ci/run installs it and its absence fails.
package testredis

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process.
type Server struct {
	tb   testing.TB
	Addr string
	port int
	cmd  *exec.Cmd
}

// Start starts a server on a free loopback port, stopped at cleanup.
func Start(tb testing.TB) *Server {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatal("redis-server is not installed (.ci/run installs it)")
		}
		tb.Skip("redis-server is not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	s := &Server{tb: tb, Addr: "127.0.0.1:" + strconv.Itoa(port), port: port}
	s.start()
	tb.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	s.tb.Helper()
	s.cmd = exec.Command("redis-server", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("redis-server on %s does not answer: %v", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (its data is lost, as on a crash) and waits.
// Idempotent.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart stops the server and starts a fresh one on the same port.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	s.start()
}

// OutOfMemory makes the server refuse every command that may grow its
// memory (maxmemory 1 byte, noeviction: a full Redis's OOM reply) until
// the returned func is called or the test ends.
func (s *Server) OutOfMemory(tb testing.TB) (restore func()) {
	tb.Helper()
	return s.until(tb, [][]any{{"CONFIG", "SET", "maxmemory-policy", "noeviction"}, {"CONFIG", "SET", "maxmemory", "1"}},
		[]any{"CONFIG", "SET", "maxmemory", "0"})
}

// ReadOnly makes the server a read-only replica (of a primary that never
// answers, so its data stays: a failover that left the edges on the old
// primary) until the returned func is called or the test ends.
func (s *Server) ReadOnly(tb testing.TB) (restore func()) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close() // nothing listens there: the replica never syncs
	return s.until(tb, [][]any{{"REPLICAOF", "127.0.0.1", port}}, []any{"REPLICAOF", "NO", "ONE"})
}

// until sends the commands do, and returns a func that sends undo once
// (also run at the test's end).
func (s *Server) until(tb testing.TB, do [][]any, undo []any) func() {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	ctx := context.Background()
	for _, cmd := range do {
		if err := c.Do(ctx, cmd...).Err(); err != nil {
			_ = c.Close()
			tb.Fatalf("%v: %v", cmd, err)
		}
	}
	var once sync.Once
	restore := func() {
		once.Do(func() {
			if err := c.Do(ctx, undo...).Err(); err != nil {
				tb.Errorf("%v: %v", undo, err)
			}
			_ = c.Close()
		})
	}
	tb.Cleanup(restore)
	return restore
}

// Client is a plain client of the server, to look at or tamper with its
// keys, closed at the test's end.
func (s *Server) Client(tb testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}
