package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fencepost/fencepost/fence"
)

// Downstreams the scenario can write to: the Go reference service
// (fence/refsvc, in-process), or the example services of the Python and
// TypeScript validators (fence/python/examples/fastapi_service.py,
// fence/js/examples/express_service.ts) run as child processes from a
// fencepost checkout.
const (
	DownstreamGo     = "go"
	DownstreamPython = "python"
	DownstreamNode   = "node"
)

// downstreamNames describe each kind in the timeline.
var downstreamNames = map[string]string{
	DownstreamGo:     "reference (Go, fence/refsvc)",
	DownstreamPython: "FastAPI (Python, fence/python)",
	DownstreamNode:   "Express (TypeScript, fence/js)",
}

// external is a downstream service in a child process, with the routes of
// fence/refsvc plus GET /v1/stats for its rejection counters.
type external struct {
	cmd    *exec.Cmd
	addr   string
	client *http.Client
	done   chan struct{}
	stderr *strings.Builder
}

// externalCommand returns the command line of a downstream kind, checked
// for presence so a missing build fails with the fix.
func externalCommand(kind, repo string, port int) (*exec.Cmd, error) {
	p := strconv.Itoa(port)
	switch kind {
	case DownstreamPython:
		script := filepath.Join(repo, "fence", "python", "examples", "fastapi_service.py")
		if _, err := os.Stat(script); err != nil {
			return nil, fmt.Errorf("downstream python: %s not found: run from a fencepost checkout or pass --repo", script)
		}
		cmd := exec.Command("/usr/bin/python3", script, "--port", p)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(repo, "fence", "python", "src"))
		return cmd, nil
	case DownstreamNode:
		script := filepath.Join(repo, "fence", "js", "dist", "examples", "express_service.js")
		if _, err := os.Stat(script); err != nil {
			return nil, fmt.Errorf("downstream node: %s not found: build it with (cd fence/js && npm ci && npx tsc -p .), or run test/validators.sh", script)
		}
		node := os.Getenv("FENCEPOST_NODE")
		if node == "" {
			node = "node"
		}
		return exec.Command(node, script, "--port", p), nil
	}
	return nil, fmt.Errorf("downstream %q: want %s, %s or %s", kind, DownstreamGo, DownstreamPython, DownstreamNode)
}

// startExternal starts a downstream kind on a free loopback port and waits
// (bounded) until it answers /healthz.
func startExternal(kind, repo string) (*external, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd, err := externalCommand(kind, repo, port)
	if err != nil {
		return nil, err
	}
	e := &external{cmd: cmd, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		client: &http.Client{Timeout: 5 * time.Second}, done: make(chan struct{}), stderr: &strings.Builder{}}
	cmd.Stderr = e.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("downstream %s: %w", kind, err)
	}
	go func() { _ = cmd.Wait(); close(e.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := e.client.Get("http://" + e.addr + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return e, nil
			}
		}
		select {
		case <-e.done:
			return nil, fmt.Errorf("downstream %s exited: %s", kind, e.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			e.close()
			return nil, fmt.Errorf("downstream %s did not answer /healthz within 30s: %s", kind, e.stderr.String())
		}
		time.Sleep(50 * time.Millisecond) // poll interval, bounded by the deadline
	}
}

func (e *external) get(path string, into any) error {
	resp, err := e.client.Get("http://" + e.addr + path)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", path, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// log returns every accepted write (nil when the service does not answer;
// the scenario polls).
func (e *external) log() []AcceptedWrite {
	var doc struct {
		Entries []AcceptedWrite `json:"entries"`
	}
	if err := e.get("/v1/log", &doc); err != nil {
		return nil
	}
	return doc.Entries
}

func (e *external) stats() (rejected, stale int) {
	var s struct {
		Rejected      int `json:"rejected"`
		RejectedStale int `json:"rejected_stale"`
	}
	_ = e.get("/v1/stats", &s)
	return s.Rejected, s.RejectedStale
}

func (e *external) checkLog() error {
	var writes []fence.AppliedWrite
	for _, a := range e.log() {
		writes = append(writes, fence.AppliedWrite{Key: fence.TaskKey{Task: a.Task}, Epoch: a.Epoch})
	}
	return fence.CheckEpochOrder(writes)
}

// close stops the child by PID (SIGTERM, then SIGKILL after a bound).
func (e *external) close() error {
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	select {
	case <-e.done:
	case <-ctx.Done():
		_ = e.cmd.Process.Kill()
		<-e.done
		return errors.New("downstream did not stop on SIGTERM; killed")
	}
	return nil
}
