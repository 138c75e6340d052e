//go:build unix

package fleetbench

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nginxConf is an nginx round-robin upstream over the backends (its
// default balancing), streaming unbuffered as an LLM proxy must.
const nginxConf = `worker_processes 1;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  upstream fleet {
%[2]s    keepalive 64;
  }
  server {
    listen 127.0.0.1:%[3]d;
    location / {
      proxy_pass http://fleet;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`

// startNginx runs nginx (Debian's package) round robin in front of the
// backends, the outside reference; without nginx the row is skipped.
// nginx leads its own process group, and cleanup stops the whole group:
// a worker outlives a master killed alone and keeps serving the port.
func startNginx(b testing.TB, urls []string) string {
	b.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		b.Skip("nginx is not installed (apt-get install nginx-light)")
	}
	dir := b.TempDir()
	var servers strings.Builder
	for _, u := range urls {
		fmt.Fprintf(&servers, "    server %s;\n", strings.TrimPrefix(u, "http://"))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, dir, servers.String(), port), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"))
	cmd.SysProcAttr = nginxProcAttr()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	// Owner: startNginx's cleanup; ends when the master exits.
	go func() { _ = cmd.Wait(); close(done) }()
	b.Cleanup(func() { stopGroup(cmd.Process.Pid, done) })
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(base + "/health"); err == nil {
			_ = resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("nginx did not come up")
		}
	}
	return base
}

// stopGroup ends the process group led by pgid: SIGQUIT (nginx's graceful
// stop: the master waits for its workers), bounded by a grace period, then
// SIGKILL to every member still there. done closes when the leader has
// been waited for.
func stopGroup(pgid int, done <-chan struct{}) {
	_ = syscall.Kill(-pgid, syscall.SIGQUIT)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-done
}
