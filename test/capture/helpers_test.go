package capture

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/test/netns"
)

// The helpers both end-to-end tests use: upstreams that record stamps,
// processes of the binary, rule listings, a directory other uids share.

type proxiedReply struct {
	status  int
	problem api.Problem
}

// viaProxy posts through the sidecar's proxy port, as a cooperating worker.
func viaProxy(t *testing.T, proxyAddr, target string) proxiedReply {
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: proxyAddr})}, Timeout: 10 * time.Second}
	var out proxiedReply
	require.Eventually(t, func() bool {
		resp, err := c.Post(target, "text/plain", strings.NewReader("x"))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		out.status = resp.StatusCode
		_ = json.Unmarshal(b, &out.problem)
		return resp.StatusCode == 409
	}, 20*time.Second, 50*time.Millisecond, "the proxied write is blocked after the revoke")
	return out
}

// recorder is an upstream that records the stamps of each request.
type recorder struct {
	addr   string
	scheme string
	mu     sync.Mutex
	reqs   []seen
}

type seen struct {
	path         string
	tokens, keys []string
}

func startRecorder(t *testing.T, host string, tc *tls.Config) *recorder {
	ln, err := net.Listen("tcp", net.JoinHostPort(strings.Trim(host, "[]"), "0"))
	require.NoError(t, err)
	r := &recorder{addr: ln.Addr().String(), scheme: "http"}
	if tc != nil {
		ln, r.scheme = tls.NewListener(ln, tc), "https"
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, seen{path: req.URL.Path, tokens: req.Header.Values(fence.HeaderToken), keys: req.Header.Values(fence.HeaderIdempotencyKey)})
		r.mu.Unlock()
		_, _ = io.WriteString(w, "done")
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

func (r *recorder) url() string { return r.scheme + "://" + r.addr }

func (r *recorder) last() seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) == 0 {
		return seen{}
	}
	return r.reqs[len(r.reqs)-1]
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// startPing answers "pong" to each line: TCP the sidecar cannot read.
func startPing(t *testing.T, addr string) string {
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					if _, err := br.ReadString('\n'); err != nil {
						return
					}
					if _, err := io.WriteString(c, "pong\n"); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func requirePong(t *testing.T, c net.Conn) {
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	_, err := io.WriteString(c, "ping\n")
	require.NoError(t, err)
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "pong\n", line)
}

func requireClosed(t *testing.T, c net.Conn, msg string) {
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	_, _ = io.WriteString(c, "ping\n")
	_, err := bufio.NewReader(c).ReadString('\n')
	require.Error(t, err, msg)
	ne, ok := err.(net.Error)
	require.False(t, ok && ne.Timeout(), "%s: timed out instead of closing", msg)
}

// proc is the sidecar process; done closes when it has exited.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startSidecar runs the binary's sidecar as sidecarUID.
func startSidecar(t *testing.T, bin, dir string, args ...string) *proc {
	cmd := exec.Command(bin, append([]string{"sidecar"}, args...)...)
	log, err := os.Create(filepath.Join(dir, "sidecar.log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: sidecarUID, Gid: sidecarUID, NoSetGroups: true}}
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill() // by its PID: a process this test started
			<-p.done
		}
		_ = log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("sidecar log:\n%s", b)
		}
	})
	return p
}

// stop ends the sidecar with SIGTERM (it drains) and waits for it.
func (p *proc) stop(t *testing.T) {
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the sidecar did not stop within 30s of SIGTERM")
	}
}

func waitReady(t *testing.T, ctx context.Context, control string, p *proc) {
	for ctx.Err() == nil {
		select {
		case <-p.done:
			t.Fatal("the sidecar exited before it was ready")
		default:
		}
		if resp, err := http.Get("http://" + control + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the sidecar did not hold its lease in time")
}

// ruleCounter returns the packet count of the tagged rule.
func ruleCounter(t *testing.T, comment string) int {
	out, err := exec.Command("iptables-save", "-c", "-t", "nat").CombinedOutput()
	require.NoError(t, err, string(out))
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, comment) && strings.HasPrefix(line, "[") {
			n, _ := strconv.Atoi(strings.Split(strings.Trim(strings.Fields(line)[0], "[]"), ":")[0])
			return n
		}
	}
	t.Fatalf("no rule %q in:\n%s", comment, out)
	return 0
}

func runOK(t *testing.T, bin string, args ...string) {
	out, err := exec.Command(bin, args...).CombinedOutput()
	require.NoError(t, err, "fencepost %s:\n%s", strings.Join(args, " "), out)
	t.Logf("fencepost %s: %s", args[0], strings.TrimSpace(string(out)))
}

func runEnv(t *testing.T, env []string, name string, args ...string) string {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s: %s", name, out)
	return string(out)
}

// sharedDir is a directory the sidecar's uid can read and write.
func sharedDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "fpcap-e2e-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o777))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func copyFile(t *testing.T, from, to string) {
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o755))
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

func ipv6() bool {
	ln, err := net.Listen("tcp", "["+netns.UpstreamIPv6+"]:0")
	if err != nil {
		return false
	}
	_ = ln.Close()
	return true
}
