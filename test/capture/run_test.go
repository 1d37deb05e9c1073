package capture

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/proxy/mitm"
	"github.com/fencepost/fencepost/test/netfault"
	"github.com/fencepost/fencepost/test/netns"
)

// runInsideEnv names the namespace the re-run of TestRunCaptureFencesItsChild
// runs in.
const runInsideEnv = "CAPTURE_RUN_NETNS"

// The uids of the test: the captured child's, and a stranger's whose
// connections must stay uncaptured (unique to this test, in its own
// namespace).
const (
	childUID    = 4251
	strangerUID = 4252
)

// TestRunCaptureFencesItsChild runs fencepost run --capture against a
// fencepost dev cluster, in a namespace of its own: a child that ignores
// every proxy setting (curl --noproxy '*') writing to an upstream on
// loopback has each write stamped exactly once while it holds the lease
// and blocked with the sidecar's problem+json after a revoke; another
// uid's connections are not captured, nor may it use the transparent
// listener directly; and the run's tagged rules are gone however it ends:
// the child killed, a normal exit, SIGTERM to the run, a failed start.
// Without root the run refuses with one line and exit 2.
func TestRunCaptureFencesItsChild(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (test/run.sh installs it as root): the child is curl --noproxy '*'")
	}
	if !netns.Inside(runInsideEnv) {
		netns.Reexec(t, "fpcaprun", runInsideEnv, binaryEnv+"="+netfault.Binary(t))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	dir := sharedDir(t)
	bin := filepath.Join(dir, "fencepost")
	copyFile(t, os.Getenv(binaryEnv), bin)
	dev := startDev(t, ctx, bin, dir)
	up := startRecorder(t, "127.0.0.1", nil)     // the child's upstream, on loopback
	direct := startRecorder(t, "127.0.0.1", nil) // the stranger's
	proxyAddr, controlAddr := freeAddr(t), freeAddr(t)
	runArgs := append(dev.sidecarArgs(t, bin, dir), "--task", "run-t1", "--worker-on-lost", "none",
		"--proxy-addr", proxyAddr, "--control-addr", controlAddr, "--capture", "--capture-uid", strconv.Itoa(childUID))

	// Not root: refused with one line naming the flag, exit 2.
	out, code := runAs(t, strangerUID, bin, slices.Concat([]string{"run"}, runArgs, []string{"--", "true"})...)
	require.Equal(t, 2, code, out)
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 1, out)
	require.Contains(t, out, "--capture")
	require.Contains(t, out, "root")

	// The child posts every 100 ms (bounded), one file per reply.
	child := fmt.Sprintf(`echo $$ > %[1]s/child.pid
i=0
while [ $i -lt 900 ]; do
  curl -sS --noproxy '*' -m 5 -X POST -d x -o %[1]s/body-$i -w "$i %%{http_code}\n" %[2]s/w/$i >> %[1]s/codes
  i=$((i+1)); sleep 0.1
done`, dir, up.url())
	run := startRun(t, bin, dir, "run-killed", slices.Concat(runArgs, []string{"--", "sh", "-c", child})...)
	tag := "fencepost-run-" + strconv.Itoa(childUID)
	require.Eventually(t, func() bool { return up.count() >= 3 }, 30*time.Second, 50*time.Millisecond, "the child's writes arrive")
	require.NotEmpty(t, taggedRules(t, tag), "the run's rules are installed while it runs")
	up.mu.Lock()
	for _, r := range up.reqs {
		require.Len(t, r.tokens, 1, "%s: stamped exactly once", r.path)
		require.Len(t, r.keys, 1, "%s: one idempotency key", r.path)
	}
	up.mu.Unlock()

	// A second run under the same uid is refused and leaves the first's
	// rules alone.
	before := taggedRules(t, tag)
	second := slices.Concat(dev.sidecarArgs(t, bin, dir), []string{"--task", "run-t9", "--proxy-addr", freeAddr(t), "--control-addr", freeAddr(t),
		"--capture", "--capture-uid", strconv.Itoa(childUID), "--", "true"})
	out, code = runAs(t, 0, bin, append([]string{"run"}, second...)...)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "already has capture rules")
	require.Equal(t, before, taggedRules(t, tag), "the refused run did not touch the first run's rules")

	// Another uid is not captured, and may not use the listener itself.
	out, code = runAs(t, strangerUID, "curl", "-sS", "--noproxy", "*", "-X", "POST", "-d", "x", direct.url()+"/stranger")
	require.Equal(t, 0, code, out)
	require.Empty(t, direct.last().tokens, "another uid's write goes direct, unstamped")
	out, code = runAs(t, strangerUID, "curl", "-sS", "--noproxy", "*", "-m", "5", "-H", "Host: "+up.addr, "http://"+listenerOf(t, tag)+"/w")
	require.NotEqual(t, 0, code, "a connection straight to the transparent listener is closed unserved: %s", out)

	// Revoked: the child's writes are blocked with the proxied problem.
	dev.ctl(t, bin, "tasks", "revoke", "run-t1", "--reason", "run capture test")
	proxied := viaProxy(t, proxyAddr, up.url()+"/w/proxied")
	var blocked int
	require.Eventually(t, func() bool {
		blocked = firstBlocked(t, dir)
		return blocked >= 0
	}, 20*time.Second, 50*time.Millisecond, "the child's writes are blocked after the revoke")
	reached := up.count()
	body, err := os.ReadFile(filepath.Join(dir, "body-"+strconv.Itoa(blocked)))
	require.NoError(t, err)
	var p api.Problem
	require.NoError(t, json.Unmarshal(body, &p), string(body))
	require.Equal(t, proxied.problem.Type, p.Type, "the captured write gets the problem a proxied one gets")
	require.Eventually(t, func() bool { return lastCode(t, dir) > blocked+2 }, 20*time.Second, 50*time.Millisecond)
	require.Equal(t, reached, up.count(), "no blocked write reached the upstream")

	// The child killed: the run ends with its code and its rules go.
	pid := childPID(t, dir)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL)) // a process this test started, by its pid
	require.Equal(t, 128+int(syscall.SIGKILL), run.wait(t))
	require.Empty(t, taggedRules(t, tag), "no rule left after the child was killed")

	// A normal exit, under the default uid: HTTP over IPv4 and (where the
	// kernel has it) IPv6 loopback, and HTTPS intercepted, the child
	// trusting the run's CA through the CURL_CA_BUNDLE the run sets.
	defaultTag := "fencepost-run-1338"
	ca, err := mitm.New(mitm.Config{Hosts: []string{"127.0.0.1"}})
	require.NoError(t, err)
	caFile := filepath.Join(dir, "upstream-ca.pem")
	require.NoError(t, os.WriteFile(caFile, ca.CertPEM(), 0o644))
	leaf, err := ca.Leaf("127.0.0.1")
	require.NoError(t, err)
	secure := startRecorder(t, "127.0.0.1", &tls.Config{Certificates: []tls.Certificate{*leaf}})
	script := fmt.Sprintf(`set -e; curl -sS --noproxy '*' -X POST -d x %s/once; curl -sS --noproxy '*' -X POST -d x %s/once-tls`, up.url(), secure.url())
	var up6 *recorder
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		_ = ln.Close()
		up6 = startRecorder(t, "[::1]", nil)
		script += fmt.Sprintf(`; curl -sS --noproxy '*' -g -X POST -d x %s/once6`, up6.url())
	} else {
		t.Log("no IPv6 loopback here: IPv6 capture of a run not exercised")
	}
	args := append(dev.sidecarArgs(t, bin, dir), "--task", "run-t2", "--proxy-addr", freeAddr(t), "--control-addr", freeAddr(t), "--capture",
		"--intercept-hosts", "127.0.0.1", "--intercept-bundle-file", filepath.Join(dir, "run-bundle.pem"), "--intercept-upstream-ca-file", caFile)
	out, code = runAs(t, 0, bin, slices.Concat([]string{"run"}, args, []string{"--", "sh", "-c", script})...)
	require.Equal(t, 0, code, out)
	require.Equal(t, "/once", up.last().path)
	require.Len(t, up.last().tokens, 1, "stamped exactly once under the default uid too")
	require.Equal(t, "/once-tls", secure.last().path, out)
	require.Len(t, secure.last().tokens, 1, "HTTPS: stamped exactly once")
	if up6 != nil {
		require.Equal(t, "/once6", up6.last().path)
		require.Len(t, up6.last().tokens, 1, "IPv6: stamped exactly once")
	}
	require.Empty(t, taggedRules(t, defaultTag), "no rule left after a normal exit")

	// SIGTERM to the run: forwarded, the child ends, the rules go.
	waiter := fmt.Sprintf(`echo $$ > %s/child.pid; while :; do sleep 0.1; done`, dir)
	require.NoError(t, os.Remove(filepath.Join(dir, "child.pid")))
	args = append(dev.sidecarArgs(t, bin, dir), "--task", "run-t3", "--proxy-addr", freeAddr(t), "--control-addr", freeAddr(t),
		"--capture", "--capture-uid", strconv.Itoa(childUID))
	run = startRun(t, bin, dir, "run-sigterm", slices.Concat(args, []string{"--", "sh", "-c", waiter})...)
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(dir, "child.pid")); return err == nil }, 30*time.Second, 50*time.Millisecond)
	require.NotEmpty(t, taggedRules(t, tag))
	require.NoError(t, run.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 128+int(syscall.SIGTERM), run.wait(t))
	require.Empty(t, taggedRules(t, tag), "no rule left after SIGTERM")

	// A failed start: the command does not exist.
	out, code = runAs(t, 0, bin, slices.Concat([]string{"run"}, args, []string{"--", filepath.Join(dir, "no-such-worker")})...)
	require.Equal(t, 127, code, out)
	require.Empty(t, taggedRules(t, tag), "no rule left after a failed start")

	// The run itself SIGKILLed cannot clean up: fencepost capture --remove
	// for the uid takes its rules out.
	require.NoError(t, os.Remove(filepath.Join(dir, "child.pid")))
	run = startRun(t, bin, dir, "run-sigkill", slices.Concat(args, []string{"--", "sh", "-c", waiter})...)
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(dir, "child.pid")); return err == nil }, 30*time.Second, 50*time.Millisecond)
	require.NoError(t, run.cmd.Process.Kill()) // by its pid; the child dies with it (Pdeathsig)
	run.wait(t)
	require.NotEmpty(t, taggedRules(t, tag), "a SIGKILLed run leaves its rules")
	runOK(t, bin, "capture", "--remove", "--capture-worker-uid", strconv.Itoa(childUID))
	require.Empty(t, taggedRules(t, tag), "capture --remove for the uid took them out")
}

// devCluster is a fencepost dev the test started, with its certificates.
type devCluster struct {
	http string // the cluster API, host:port
	tls  string // dev's certificate directory
}

// startDev runs fencepost dev on free ports and waits until its sidecar
// holds dev-task (so the cluster has a leader and signing keys).
func startDev(t *testing.T, ctx context.Context, bin, dir string) devCluster {
	port := func() string { return strconv.Itoa(portOf(t, freeAddr(t))) }
	httpPort, control := port(), port()
	d := devCluster{http: "127.0.0.1:" + httpPort, tls: filepath.Join(dir, "dev-tls")}
	p := startProc(t, dir, "dev", exec.Command(bin, "dev", "--data-dir", filepath.Join(dir, "dev"),
		"--ports-http", httpPort, "--ports-raft", port(), "--ports-proxy", port(), "--ports-control", control,
		"--ports-fenced", port(), "--ports-fenced-tls=0", "--ports-console=0"))
	waitReady(t, ctx, "127.0.0.1:"+control, p)
	return d
}

func portOf(t *testing.T, addr string) int {
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return n
}

// sidecarArgs are a run's flags to reach the dev cluster, with a sidecar
// certificate of its own (made once).
func (d devCluster) sidecarArgs(t *testing.T, bin, dir string) []string {
	certs := filepath.Join(dir, "run-tls")
	if _, err := os.Stat(filepath.Join(certs, "sidecar-run-worker.pem")); err != nil {
		out, err := exec.Command(bin, "tls", "cert", "create", "--sidecar", "--name", "run-worker", "--dir", certs,
			"--ca", filepath.Join(d.tls, "ca.pem"), "--ca-key", filepath.Join(d.tls, "ca-key.pem")).CombinedOutput()
		require.NoError(t, err, string(out))
	}
	return []string{"--cluster", "https://" + d.http, "--cluster-tls-ca-file", filepath.Join(d.tls, "ca.pem"),
		"--cluster-tls-cert-file", filepath.Join(certs, "sidecar-run-worker.pem"),
		"--cluster-tls-key-file", filepath.Join(certs, "sidecar-run-worker-key.pem"), "--worker-id", "run-worker"}
}

// ctl runs fencepost ctl against the dev cluster as its operator.
func (d devCluster) ctl(t *testing.T, bin string, args ...string) {
	runOK(t, bin, append([]string{"ctl", "--cluster", d.http, "--ca", filepath.Join(d.tls, "ca.pem"),
		"--cert", filepath.Join(d.tls, "operator-dev-operator.pem"), "--key", filepath.Join(d.tls, "operator-dev-operator-key.pem")}, args...)...)
}

// startRun starts fencepost run (as root) with its output in dir/name.log.
func startRun(t *testing.T, bin, dir, name string, args ...string) *proc {
	return startProc(t, dir, name, exec.Command(bin, append([]string{"run"}, args...)...))
}

// startProc starts cmd with its output in dir/name.log, killed by its pid
// at the end of the test if still running, its log shown on failure.
func startProc(t *testing.T, dir, name string, cmd *exec.Cmd) *proc {
	log, err := os.Create(filepath.Join(dir, name+".log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-p.done
			}
		}
		_ = log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("%s log:\n%s", name, b)
		}
	})
	return p
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T) int {
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end within 30s")
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return p.cmd.ProcessState.ExitCode()
}

// runAs runs name as uid (0: as this process) and returns its combined
// output and exit code.
func runAs(t *testing.T, uid int, name string, args ...string) (string, int) {
	cmd := exec.Command(name, args...)
	if uid > 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	require.NoError(t, err, "%s: %s", name, out)
	return string(out), 0
}

// taggedRules lists the rules carrying tag in every table and family.
func taggedRules(t *testing.T, tag string) []string {
	var out []string
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		b, err := exec.Command(save).CombinedOutput()
		if err != nil && save == "ip6tables-save" {
			continue // no IPv6 tables here
		}
		require.NoError(t, err, string(b))
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, tag+":") || strings.Contains(line, ":FPRUN_") {
				out = append(out, line)
			}
		}
	}
	return out
}

// listenerOf reads the transparent listener's port from the run's
// REDIRECT rule.
func listenerOf(t *testing.T, tag string) string {
	for _, line := range taggedRules(t, tag) {
		if _, port, ok := strings.Cut(line, "--to-ports "); ok {
			return "127.0.0.1:" + strings.Fields(port)[0]
		}
	}
	t.Fatalf("no REDIRECT rule tagged %s", tag)
	return ""
}

// firstBlocked returns the number of the child's first 409, or -1.
func firstBlocked(t *testing.T, dir string) int {
	for _, l := range codeLines(t, dir) {
		if l[1] == http.StatusConflict {
			return l[0]
		}
	}
	return -1
}

// lastCode returns the number of the child's last reply, or -1.
func lastCode(t *testing.T, dir string) int {
	ls := codeLines(t, dir)
	if len(ls) == 0 {
		return -1
	}
	return ls[len(ls)-1][0]
}

func codeLines(t *testing.T, dir string) [][2]int {
	b, err := os.ReadFile(filepath.Join(dir, "codes"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var out [][2]int
	for _, line := range strings.Split(string(b), "\n") {
		var n, code int
		if _, err := fmt.Sscanf(line, "%d %d", &n, &code); err == nil {
			out = append(out, [2]int{n, code})
		}
	}
	return out
}

func childPID(t *testing.T, dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "child.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	return pid
}
