// Command iopbench measures iop against a direct upstream and nginx on
// loopback: it builds bin/iop-edge and bin/iop-node, starts a mock
// vLLM-shaped upstream (this binary re-executed with -mockup), nginx when
// installed, a one-hop Go reverse proxy (this binary with -goproxy), an
// edge and a node, pins edge, node, nginx and the Go proxy to CPU 0 and the
// mock and the load generator to CPU 1, measures latency, throughput,
// paced streams, stream concurrency and memory per path, and writes a
// Markdown report.
//
// It runs on Linux only: its load generator is an epoll loop and its
// figures come from /proc, CPU affinity and process groups. Built for
// another system it says so and exits.
//
//	go run ./bench/iopbench -out docs/benchmarks.md   # full, ~5-7 minutes
//	go run ./bench/iopbench -quick                    # ~1 minute, stdout only
//
// -phases and -paths narrow a run; -steps replaces the plan's concurrency
// steps, e.g. the harness's own ceiling alone:
//
//	go run ./bench/iopbench -quick -build=false -phases steps -paths direct -steps 1000,2000,5000
package main
