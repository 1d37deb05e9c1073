package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat;
// 100 on every Linux platform Go supports.
const clockTicks = 100

// cpuTicks returns utime+stime of pid (all its threads), in clock ticks.
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may contain spaces; fields after the
	// closing parenthesis are fixed: utime is field 14, stime field 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}

// cpuMeter measures the CPU time a set of processes spends over an
// interval: the cost side of a throughput figure, which drifts far less
// than throughput on a machine shared with other work.
type cpuMeter struct {
	pids  []int
	start []int64
	t0    time.Time
}

// startCPU snapshots the CPU time of pids.
func startCPU(pids []int) *cpuMeter {
	m := &cpuMeter{pids: pids, t0: time.Now()}
	for _, p := range pids {
		m.start = append(m.start, cpuTicks(p))
	}
	return m
}

// seconds returns the CPU seconds pids used since startCPU.
func (m *cpuMeter) seconds() float64 {
	var d int64
	for i, p := range m.pids {
		if t := cpuTicks(p); t >= m.start[i] {
			d += t - m.start[i]
		}
	}
	return float64(d) / clockTicks
}

// childPIDs lists the direct children of pid (nginx's workers, squid's
// kid), whose CPU time is not in the parent's utime.
func childPIDs(pid int) []int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if c, err := strconv.Atoi(f); err == nil {
			out = append(out, c)
		}
	}
	return out
}
