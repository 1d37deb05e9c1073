package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one child process the harness started. It is stopped only
// through its own PID, never by name.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process has exited and been reaped
	err  error         // exit status, valid after done
}

// procs tracks every live child so that stopAll can end them on any exit
// path, including a panic or an interrupt.
var procs struct {
	sync.Mutex
	live map[*proc]bool
}

// startProc starts bin with args, sending its output to logPath. The child
// gets its own process group so a terminal's ^C reaches only the harness,
// which then stops the child itself.
func startProc(name, logPath, bin string, args ...string) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: f, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		procs.Lock()
		delete(procs.live, p)
		procs.Unlock()
		close(p.done)
	}()
	procs.Lock()
	if procs.live == nil {
		procs.live = map[*proc]bool{}
	}
	procs.live[p] = true
	procs.Unlock()
	return p, nil
}

// pid returns the child's process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the child has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits for the child to be reaped.
func (p *proc) kill() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM (nginx: SIGQUIT for a graceful stop of its workers),
// waits up to grace, then SIGKILLs.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
}

// stopAll stops every child still running, each by its own PID.
func stopAll() {
	procs.Lock()
	var list []*proc
	for p := range procs.live {
		list = append(list, p)
	}
	procs.Unlock()
	var wg sync.WaitGroup
	for _, p := range list {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(syscall.SIGTERM, 5*time.Second) }()
	}
	wg.Wait()
}

// tail returns the last n bytes of the child's log, for error messages.
func (p *proc) tail(n int64) string {
	b, err := os.ReadFile(p.log.Name())
	if err != nil {
		return ""
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return strings.TrimSpace(string(b))
}

// rssKiB reads VmRSS of pid from /proc, in KiB.
func rssKiB(pid int) (int64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, errors.New("no VmRSS line")
}

// treeRSSKiB sums VmRSS of pid and its direct children (nginx's workers).
func treeRSSKiB(pid int) int64 {
	total, _ := rssKiB(pid)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return total
	}
	for _, f := range strings.Fields(string(b)) {
		if c, err := strconv.Atoi(f); err == nil {
			r, _ := rssKiB(c)
			total += r
		}
	}
	return total
}

// ports hands out loopback TCP ports that were free when asked.
type ports struct{ used map[int]bool }

// next returns a free port on 127.0.0.1 not handed out before.
func (ps *ports) next() int {
	if ps.used == nil {
		ps.used = map[int]bool{}
	}
	for i := 0; i < 100; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			continue
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !ps.used[port] {
			ps.used[port] = true
			return port
		}
	}
	panic("no free loopback port")
}

// waitFor polls check every 20 ms until it returns nil or d has passed.
func waitFor(d time.Duration, what string, check func() error) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var last error
	for {
		if last = check(); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %w", what, d, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// tcpUp reports whether something accepts connections on addr.
func tcpUp(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	return c.Close()
}

// procSet is a cluster's processes, one per node; nil for a node not
// started.
type procSet []*proc

// stop terminates every started process by PID.
func (ps procSet) stop() {
	for _, p := range ps {
		if p != nil {
			p.stop(syscall.SIGTERM, 10*time.Second)
		}
	}
}

// pids lists the PIDs of the processes still running.
func (ps procSet) pids() []int {
	var out []int
	for _, p := range ps {
		if p != nil && !p.exited() {
			out = append(out, p.pid())
		}
	}
	return out
}
