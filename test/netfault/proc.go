package netfault

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var build struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// ModuleRoot finds the directory of the fencepost module's go.mod by
// walking up from the working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/fencepost/fencepost\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("netfault: go.mod of github.com/fencepost/fencepost not found above the working directory")
		}
		dir = parent
	}
}

// Binary builds the fencepost binary (./cmd/fencepost) with `go build`
// once per test binary and returns its path. Later calls return the same
// path (or the same error). The build uses the same -tags as the running
// test binary, so a deliberately broken test build (e.g. -tags
// fencepost_broken_nodeadline) starts equally broken processes. Call
// RemoveBinary from TestMain to delete it.
func Binary(tb testing.TB) string {
	tb.Helper()
	build.once.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			build.err = err
			return
		}
		dir, err := os.MkdirTemp("", "fencepost-bin-")
		if err != nil {
			build.err = err
			return
		}
		build.dir = dir
		out := filepath.Join(dir, "fencepost")
		args := []string{"build", "-o", out}
		if tags := buildTags(); tags != "" {
			args = append(args, "-tags", tags)
		}
		cmd := exec.Command("go", append(args, "./cmd/fencepost")...)
		cmd.Dir = root
		if msg, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("netfault: go build ./cmd/fencepost: %v\n%s", err, msg)
			return
		}
		build.path = out
	})
	if build.err != nil {
		tb.Fatal(build.err)
	}
	return build.path
}

// buildTags returns the -tags the running binary was built with.
func buildTags() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range bi.Settings {
		if s.Key == "-tags" {
			return s.Value
		}
	}
	return ""
}

// RemoveBinary deletes the directory Binary built into, if any.
func RemoveBinary() {
	if build.dir != "" {
		_ = os.RemoveAll(build.dir)
	}
}

// FreeAddr returns a loopback address with a port that was free a moment
// ago, for child processes that must be told their address up front. The
// port is drawn below the kernel's ephemeral range: a port the kernel
// handed out for ":0" is also one it may hand to an outgoing connection's
// source before the child binds it (EADDRINUSE, seen as a child that never
// listens), and the suites open thousands of connections. Ports are drawn
// at random and tried until one binds; ":0" is the fallback. A port is
// handed out once per process: the port is free again as soon as it is
// returned, so a later draw could name it again for another child of the
// same system before the first binds it (two dozen ports from 16,384 meet
// by chance about once in seventy systems, seen as a sidecar that cannot
// listen on a port its neighbour took).
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	if lo := ephemeralLow(); lo > 2048 {
		span := min(lo-1024, 16384)
		for range 64 {
			p := lo - 1 - rand.IntN(span)
			if !handOut(p) {
				continue
			}
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err == nil {
				addr := ln.Addr().String()
				_ = ln.Close()
				return addr
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// handedOut is every port FreeAddr drew in this process.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// handOut records port p as drawn; false when it was drawn before.
func handOut(p int) bool {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports[p] {
		return false
	}
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	handedOut.ports[p] = true
	return true
}

// ephemeralLow is the lowest port the kernel picks for outgoing
// connections and ":0" listeners (0 when it cannot tell), read once.
var ephemeralLow = sync.OnceValue(func() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return lo
})

// ProcConfig describes a child process.
type ProcConfig struct {
	// Name labels the process in logs; default the binary's base name.
	Name string
	// Binary is the executable; default Binary(tb).
	Binary string
	// Args are the arguments after the program name.
	Args []string
	// Env is added to the test's environment.
	Env []string
	// LogPath receives stdout and stderr; default <tb.TempDir()>/<Name>.log.
	LogPath string
	// Gid, when not zero, runs the process under that group id (root
	// only), so firewall rules can match its packets by owner
	// (iptables -m owner --gid-owner).
	Gid uint32
}

// Process is a child process started by Start. It is stopped (SIGKILL, by
// its PID) when the test ends if it is still running.
type Process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan struct{}
	waitErr error
}

// Start starts a child process with its output captured to a log file.
func Start(tb testing.TB, cfg ProcConfig) (*Process, error) {
	tb.Helper()
	if cfg.Binary == "" {
		cfg.Binary = Binary(tb)
	}
	if cfg.Name == "" {
		cfg.Name = filepath.Base(cfg.Binary)
	}
	if cfg.LogPath == "" {
		cfg.LogPath = filepath.Join(tb.TempDir(), cfg.Name+".log")
	}
	f, err := os.Create(cfg.LogPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(cfg.Binary, cfg.Args...)
	cmd.Env = append(os.Environ(), cfg.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: a child stopped with Pause must not sit in
	// the test's group, which the kernel hangs up (SIGHUP) when it becomes
	// orphaned with a stopped member — e.g. when the shell that started
	// the test exits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if cfg.Gid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(os.Getuid()), Gid: cfg.Gid, NoSetGroups: true}
	}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("netfault: start %s: %w", cfg.Name, err)
	}
	p := &Process{name: cfg.Name, cmd: cmd, logPath: cfg.LogPath, logFile: f, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	tb.Cleanup(func() {
		if p.Running() {
			_ = p.Kill()
		}
	})
	return p, nil
}

// Name is the process's label.
func (p *Process) Name() string { return p.name }

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// LogPath is the file holding the process's output.
func (p *Process) LogPath() string { return p.logPath }

// Logs returns the process's output so far.
func (p *Process) Logs() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// Tail returns the last n lines of the process's output.
func (p *Process) Tail(n int) string {
	lines := strings.Split(strings.TrimRight(p.Logs(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Exited is closed once the process has exited and been reaped.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// ExitErr is the process's exit error once it has exited (nil for status
// 0, and while it is running).
func (p *Process) ExitErr() error {
	select {
	case <-p.done:
		return p.waitErr
	default:
		return nil
	}
}

// signal sends sig to the process by its PID.
func (p *Process) signal(sig syscall.Signal) error {
	if !p.Running() {
		return fmt.Errorf("netfault: %s (pid %d) already exited", p.name, p.PID())
	}
	return syscall.Kill(p.PID(), sig)
}

// Pause stops the process with SIGSTOP; it keeps its sockets but runs no
// code until Resume. Signals are delivered asynchronously, so Pause waits
// (up to 2s) until every thread of the process is seen stopped.
func (p *Process) Pause() error {
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Second)
	for !p.stopped() {
		if time.Now().After(deadline) {
			return fmt.Errorf("netfault: %s (pid %d) not stopped 2s after SIGSTOP", p.name, p.PID())
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// stopped reports whether every thread of the process is in the stopped
// state, from /proc (Linux). Elsewhere it trusts the signal.
func (p *Process) stopped() bool {
	dir := fmt.Sprintf("/proc/%d/task", p.PID())
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return true
	}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			continue
		}
		// The state follows the command name, which is in parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			continue
		}
		if st := b[i+2]; st != 'T' && st != 't' {
			return false
		}
	}
	return true
}

// Resume continues a paused process with SIGCONT.
func (p *Process) Resume() error { return p.signal(syscall.SIGCONT) }

// Stop asks the process to exit with SIGTERM (resuming it first, in case
// it is paused), waits up to timeout, then kills it with SIGKILL.
func (p *Process) Stop(timeout time.Duration) error {
	if !p.Running() {
		return nil
	}
	_ = p.signal(syscall.SIGCONT)
	_ = p.signal(syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		_ = p.Kill()
		return fmt.Errorf("netfault: %s (pid %d) ignored SIGTERM for %v; killed", p.name, p.PID(), timeout)
	}
}

// Kill kills the process with SIGKILL and waits until it is reaped.
func (p *Process) Kill() error {
	if !p.Running() {
		return nil
	}
	err := p.signal(syscall.SIGKILL)
	<-p.done
	return err
}
