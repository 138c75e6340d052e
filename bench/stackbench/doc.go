// Package stackbench holds in-process microbenchmarks of the iop hot paths
// (tunnel and run, non-streamed and streamed) over real loopback sockets,
// for CPU profiles:
//
//	go test -run '^$' -bench . -cpuprofile cpu.out ./bench/stackbench
//	go tool pprof -top -tagfocus proc=edge cpu.out   # or proc=node, client, mock
//
// Every component runs under a pprof label (proc=edge, node, mock, client)
// inherited by the goroutines it starts, so one profile splits by process.
package stackbench
