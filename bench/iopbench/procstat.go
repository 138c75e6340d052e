//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// rssKB is VmRSS of the process group led by p (all its processes), in kB.
func rssKB(p *proc) int64 {
	if p == nil || p.cmd == nil {
		return 0
	}
	var total int64
	for _, pid := range groupPIDs(p.cmd.Process.Pid) {
		total += rssOfPID(strconv.Itoa(pid))
	}
	return total
}

// rssOfPID is VmRSS of /proc/<pid> ("self" for this process), in kB.
func rssOfPID(pid string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

// procStat returns the fields of /proc/pid/stat after the command name.
func procStat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// groupPIDs lists the processes whose process group is pgid.
func groupPIDs(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := procStat(pid); len(f) > 3 && f[2] == strconv.Itoa(pgid) {
			out = append(out, pid)
		}
	}
	return out
}

// cpuNanos is the CPU time of a process in ns: the sum of its threads'
// /proc/PID/task/TID/schedstat (nanosecond resolution, unlike the 10 ms
// ticks of /proc/PID/stat). Go and nginx threads do not exit during a run.
func cpuNanos(pid string) int64 {
	ents, err := os.ReadDir("/proc/" + pid + "/task")
	if err != nil {
		return 0
	}
	var total int64
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + pid + "/task/" + e.Name() + "/schedstat")
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			total += n
		}
	}
	return total
}

// ioCalls is syscr+syscw (read and write system calls) of a pid.
func ioCalls(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0
	}
	var n int64
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "syscr" || k == "syscw") {
			x, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			n += x
		}
	}
	return n
}

// machineBusy is the busy ticks of all CPUs from /proc/stat.
func machineBusy() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
	var busy int64
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		x, _ := strconv.ParseInt(v, 10, 64)
		busy += x
	}
	return busy
}

// snapshot is CPU time and read/write system calls per component.
type snapshot struct {
	at    time.Time
	nanos map[string]int64
	calls map[string]int64
	busy  int64
}

var components = []string{"edge", "node", "nginx", "goproxy", "mock"}

func (h *harness) procOf(name string) *proc {
	switch name {
	case "edge":
		return h.edge
	case "node":
		return h.node
	case "nginx":
		return h.nginx
	case "goproxy":
		return h.goproxy
	}
	return h.mock
}

func (h *harness) snapshot() snapshot {
	s := snapshot{at: time.Now(), nanos: map[string]int64{}, calls: map[string]int64{}, busy: machineBusy()}
	for _, c := range components {
		if p := h.procOf(c); p != nil && p.cmd != nil {
			for _, pid := range groupPIDs(p.cmd.Process.Pid) {
				s.nanos[c] += cpuNanos(strconv.Itoa(pid))
				s.calls[c] += ioCalls(pid)
			}
		}
	}
	s.nanos["loadgen"] = cpuNanos("self")
	s.calls["loadgen"] = ioCalls(os.Getpid())
	return s
}

// measureIdle records every component's idle CPU rate (ns per second).
func (h *harness) measureIdle(d time.Duration) {
	before := h.snapshot()
	time.Sleep(d)
	now := h.snapshot()
	h.idle = map[string]float64{}
	for k, v := range now.nanos {
		h.idle[k] = float64(v-before.nanos[k]) / now.at.Sub(before.at).Seconds()
	}
}

// usage is what the components spent per request between two snapshots.
type usage struct {
	CPU      map[string]float64 // µs per request
	Calls    map[string]float64 // read+write system calls per request
	OtherPct float64            // CPU of processes outside the benchmark, % of the machine
}

func (h *harness) since(before snapshot, requests int) usage {
	now := h.snapshot()
	u := usage{CPU: map[string]float64{}, Calls: map[string]float64{}}
	el := now.at.Sub(before.at).Seconds()
	var ours int64
	for k, v := range now.nanos {
		ours += v - before.nanos[k]
		if requests > 0 {
			// What the component spends while idle (timers, heartbeats,
			// the Go runtime's monitor) is not the requests' cost.
			busy := float64(v-before.nanos[k]) - h.idle[k]*el
			u.CPU[k] = max(0, busy/1e3/float64(requests))
			u.Calls[k] = float64(now.calls[k]-before.calls[k]) / float64(requests)
		}
	}
	if avail := now.at.Sub(before.at).Seconds() * 100 * float64(runtime.NumCPU()); avail > 0 {
		u.OtherPct = max(0, (float64(now.busy-before.busy)-float64(ours)/1e7)*100/avail) // 1 tick = 10 ms
	}
	return u
}

func canPin() bool {
	_, err := exec.LookPath("taskset")
	return err == nil && runtime.NumCPU() >= 2
}

// pinSelf binds every thread of this process (and so every later one) to
// cpu, and sizes the scheduler to it.
func pinSelf(cpu int) error {
	var set unix.CPUSet
	set.Zero()
	set.Set(cpu)
	for range 2 { // a thread started during the first pass is caught by the second
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				return err
			}
		}
	}
	runtime.GOMAXPROCS(1)
	return nil
}

// raiseNofile lifts the soft open-file limit to the hard one.
func raiseNofile() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return lim.Cur, err
		}
	}
	return lim.Cur, nil
}

// renice sets the nice value of every thread of this process (nice is per
// thread on Linux); threads and children started later inherit it.
func renice(n int) error {
	for range 2 {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, n); err != nil && !errors.Is(err, syscall.ESRCH) {
				return err
			}
		}
	}
	return nil
}
