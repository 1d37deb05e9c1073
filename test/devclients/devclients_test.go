package devclients

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// goClientEnv, when set, makes this test binary act as the Go client: one
// POST with http.Post (so http.DefaultTransport and ProxyFromEnvironment
// decide, exactly as in a worker), printing the body and then the status.
const goClientEnv = "DEVCLIENTS_GO_POST"

func TestMain(m *testing.M) {
	if target := os.Getenv(goClientEnv); target != "" {
		u, body, _ := strings.Cut(target, " ")
		resp, err := http.Post(u, "text/plain", strings.NewReader(body))
		if err != nil {
			fmt.Printf("%v\n0\n", err)
			os.Exit(0)
		}
		b, _ := io.ReadAll(resp.Body)
		fmt.Printf("%s\n%d\n", b, resp.StatusCode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// client sends one POST of body to u with env, as a user's program would,
// and returns the status (0 when no HTTP answer came) and the body or error.
type client struct {
	name string
	// why is non-empty when the client is missing here.
	why  string
	post func(ctx context.Context, env []string, u, body string) (int, string)
}

func TestDevBannerWorksForEveryClient(t *testing.T) {
	clients := availableClients(t)
	dev := startDev(t)
	t.Logf("banner:\n%s", dev.banner)

	// With the lease: every client's write arrives stamped.
	for _, c := range clients {
		t.Run(c.name+"/with lease", func(t *testing.T) {
			if c.why != "" {
				t.Skip(c.why)
			}
			// node fetch tunnels even http:// URLs through CONNECT; the
			// sidecar fences the plain HTTP inside like any proxied request.
			// The README's client table says so; change both together.
			for _, u := range []string{dev.writeURL, dev.httpsWriteURL} {
				body := marker(c.name)
				status, out := c.post(t.Context(), dev.env, u, body)
				require.Equal(t, http.StatusCreated, status, "%s: %s", u, out)
				e := dev.arrived(t, body)
				require.NotNil(t, e, "the write to %s did not reach the fenced service", u)
				require.Positive(t, e.Epoch, "stamped with the lease's epoch")
				require.NotEmpty(t, e.IdempotencyKey, "stamped with an Idempotency-Key")
				require.Equal(t, "dev-worker", e.Holder)
			}
		})
	}

	// Node before 24 ignores the proxy variables: the README's table says
	// its writes are not fenced. Held to that: with the printed environment
	// the write is not accepted (it cannot even resolve the .localhost name
	// without the sidecar) and never arrives.
	t.Run("node < 24 is not fenced", func(t *testing.T) {
		v, err := exec.Command("/usr/bin/node", "-p", "process.versions.node.split('.')[0]").Output()
		if err != nil {
			t.Skip("no /usr/bin/node (Debian's nodejs)")
		}
		if n, _ := strconv.Atoi(strings.TrimSpace(string(v))); n >= 24 {
			t.Skip("/usr/bin/node is Node " + strings.TrimSpace(string(v)) + ", not an older one")
		}
		const script = `const req = require('node:http').request(new URL(process.argv[1]), {method: 'POST'}, (res) => {
  let b = ''; res.on('data', (d) => b += d); res.on('end', () => console.log(b + '\n' + res.statusCode));
});
req.on('error', (e) => console.log(e.message + '\n0'));
req.end(process.argv[2]);`
		body := marker("node < 24")
		status, out := runClient(t.Context(), dev.env, "/usr/bin/node", "-e", script, dev.writeURL, body)
		require.NotEqual(t, http.StatusCreated, status, out)
		require.Nil(t, dev.arrived(t, body), "the write must not reach the service")
	})

	// Why the banner names fenced.localhost: Go's ProxyFromEnvironment never
	// proxies a loopback IP, so the same write to 127.0.0.1 goes direct,
	// unstamped, and the fenced service refuses it (400).
	t.Run("go net/http to 127.0.0.1 bypasses the proxy", func(t *testing.T) {
		body := marker("go direct")
		status, out := clients[0].post(t.Context(), dev.env, dev.direct+"/v1/tasks/dev-task/writes", body)
		require.Equal(t, http.StatusBadRequest, status, out)
		require.Nil(t, dev.arrived(t, body))
	})

	// The printed revoke line, from another directory, without fencepost on
	// PATH: under go run it names a kept copy of the binary by absolute path.
	require.True(t, strings.HasPrefix(dev.revoke, "/"), "under go run the line names a binary by absolute path: %q", dev.revoke)
	cmd := exec.CommandContext(t.Context(), "/bin/sh", "-c", dev.revoke)
	cmd.Dir = t.TempDir()
	cmd.Env = append(cleanEnv(), "PATH=/usr/bin:/bin")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the printed line %q failed:\n%s", dev.revoke, out)
	dev.waitLeaseLost(t)

	for _, c := range clients {
		t.Run(c.name+"/revoked", func(t *testing.T) {
			if c.why != "" {
				t.Skip(c.why)
			}
			for _, u := range []string{dev.writeURL, dev.httpsWriteURL} {
				body := marker(c.name)
				status, out := c.post(t.Context(), dev.env, u, body)
				require.Equal(t, http.StatusConflict, status, "%s: %s", u, out)
				require.Contains(t, out, "lease-revoked")
				require.Nil(t, dev.arrived(t, body), "a write without a lease reached the service")
			}
		})
	}
}

// availableClients lists every client of the README's table, each either
// runnable here or carrying the reason it is not.
func availableClients(t *testing.T) []client {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	cs := []client{{name: "go net/http", post: func(ctx context.Context, env []string, u, body string) (int, string) {
		return runClient(ctx, append(env, goClientEnv+"="+u+" "+body), self)
	}}}

	curl := client{name: "curl", post: func(ctx context.Context, env []string, u, body string) (int, string) {
		return runClient(ctx, env, "curl", "-sS", "-w", "\n%{http_code}", "-X", "POST", "--data-binary", body, u)
	}}
	if _, err := exec.LookPath("curl"); err != nil {
		curl.why = "curl not installed (apt-get install curl; test/devclients.sh does it as root)"
	}
	cs = append(cs, curl)

	for _, lib := range []string{"requests", "httpx"} {
		c := client{name: "python " + lib, post: func(ctx context.Context, env []string, u, body string) (int, string) {
			kw := map[string]string{"requests": "data", "httpx": "content"}[lib]
			script := "import sys, " + lib + "\nr = " + lib + ".post(sys.argv[1], " + kw + "=sys.argv[2].encode())\nprint(r.text)\nprint(r.status_code)\n"
			return runClient(ctx, env, "/usr/bin/python3", "-c", script, u, body)
		}}
		if err := exec.Command("/usr/bin/python3", "-c", "import "+lib).Run(); err != nil {
			c.why = "/usr/bin/python3 cannot import " + lib + " (apt-get install python3-" + lib + "; test/devclients.sh does it as root)"
		}
		cs = append(cs, c)
	}

	node, why := node24(t)
	nodeHTTP := client{name: "node node:http", why: why, post: func(ctx context.Context, env []string, u, body string) (int, string) {
		const script = `const u = new URL(process.argv[1]);
const http = require(u.protocol === 'https:' ? 'node:https' : 'node:http');
const req = http.request(u, {method: 'POST'}, (res) => {
  let b = ''; res.on('data', (d) => b += d); res.on('end', () => console.log(b + '\n' + res.statusCode));
});
req.on('error', (e) => console.log(e.message + '\n0'));
req.end(process.argv[2]);`
		return runClient(ctx, env, node, "-e", script, u, body)
	}}
	nodeFetch := client{name: "node fetch", why: why, post: func(ctx context.Context, env []string, u, body string) (int, string) {
		const script = `fetch(process.argv[1], {method: 'POST', body: process.argv[2]})
  .then(async (r) => console.log((await r.text()) + '\n' + r.status))
  .catch((e) => console.log(e.message + ' ' + (e.cause ? e.cause.message : '') + '\n0'));`
		return runClient(ctx, env, node, "-e", script, u, body)
	}}
	return append(cs, nodeHTTP, nodeFetch)
}

// node24 returns a Node.js 24 binary from test/install-node24.sh, or why
// there is none.
func node24(t *testing.T) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(repoRoot(t), "test", "install-node24.sh")).Output()
	if err != nil {
		return "", "no Node.js 24 (test/install-node24.sh failed: " + errText(err) + ")"
	}
	return strings.TrimSpace(string(out)), ""
}

// runClient runs a client program whose output ends with the status code on
// its own line.
func runClient(ctx context.Context, env []string, name string, args ...string) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	text := strings.TrimRight(string(out), "\n")
	i := strings.LastIndexByte(text, '\n')
	status, perr := strconv.Atoi(strings.TrimSpace(text[i+1:]))
	if perr != nil {
		return 0, fmt.Sprintf("%s (%v)", out, err)
	}
	return status, text[:max(i, 0)]
}

// dev is a running `fencepost dev` and what its banner printed.
type dev struct {
	banner   string
	env      []string // the clean environment plus the printed exports
	writeURL string   // the fenced service's write route for the held task
	// httpsWriteURL is the same route over HTTPS, which the sidecar
	// intercepts with its own CA (the banner's CA-bundle exports).
	httpsWriteURL string
	direct        string // the fenced service on 127.0.0.1, for checking arrivals
	control       string // the sidecar's control API
	revoke        string // the printed revoke line
}

// startDev runs `go run ./cmd/fencepost dev` as the README says, on free
// ports, and reads its banner. It is stopped with Ctrl-C (SIGINT to its
// process group) at the end of the test.
func startDev(t *testing.T) *dev {
	t.Helper()
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH")
	}
	cmd := exec.Command(gotool, "run", "./cmd/fencepost", "dev", "--data-dir", filepath.Join(t.TempDir(), "data"),
		"--ports-http=0", "--ports-raft=0", "--ports-proxy=0", "--ports-control=0", "--ports-fenced=0", "--ports-fenced-tls=0", "--ports-console=0", "--log-format=json")
	cmd.Dir = repoRoot(t)
	cmd.Env = cleanEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			t.Errorf("fencepost dev did not stop within 30s of Ctrl-C")
		}
	})

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	d := &dev{}
	var banner strings.Builder
	// A cold build can take minutes on a busy machine; a warm one seconds.
	deadline := time.After(6 * time.Minute)
	for d.revoke == "" || d.httpsWriteURL == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("fencepost dev exited before printing its banner:\n%s\n%s", banner.String(), stderr.String())
			}
			banner.WriteString(l + "\n")
			d.parse(t, strings.TrimSpace(l))
		case <-deadline:
			t.Fatalf("no banner from fencepost dev after 6 minutes:\n%s\n%s", banner.String(), stderr.String())
		}
	}
	go func() {
		for range lines { // keep the pipe drained
		}
	}()
	d.banner = banner.String()
	require.NotEmpty(t, d.writeURL, d.banner)
	require.NotEmpty(t, d.httpsWriteURL, d.banner)
	require.NotEmpty(t, d.control, d.banner)
	require.Contains(t, strings.Join(d.env, " "), "HTTP_PROXY=", d.banner)
	return d
}

// parse picks what the test needs out of one banner line.
func (d *dev) parse(t *testing.T, l string) {
	t.Helper()
	fields := strings.Fields(l)
	switch {
	case len(fields) == 0:
	case fields[0] == "export":
		if d.env == nil {
			d.env = cleanEnv()
		}
		for _, f := range fields[1:] {
			if strings.HasPrefix(f, "#") {
				break
			}
			d.env = append(d.env, f)
		}
	case strings.HasPrefix(l, "fenced service"):
		u, err := url.Parse(fields[2])
		require.NoError(t, err)
		if u.Scheme == "https" {
			d.httpsWriteURL = u.String() + "/v1/tasks/dev-task/writes"
			break
		}
		d.writeURL = u.String() + "/v1/tasks/dev-task/writes"
		d.direct = "http://127.0.0.1:" + u.Port()
	case strings.HasPrefix(l, "sidecar control"):
		d.control = fields[2]
	case strings.Contains(l, " tasks revoke "):
		d.revoke = l
	}
}

// entry is one accepted write in the fenced service's log.
type entry struct {
	Epoch          uint64 `json:"epoch"`
	Holder         string `json:"holder"`
	IdempotencyKey string `json:"idempotency_key"`
	BodySHA256     string `json:"body_sha256"`
}

// direct is an HTTP client that never uses a proxy.
var direct = &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second}

// arrived returns the fenced service's log entry for body, or nil.
func (d *dev) arrived(t *testing.T, body string) *entry {
	t.Helper()
	resp, err := direct.Get(d.direct + "/v1/log")
	require.NoError(t, err)
	defer resp.Body.Close()
	var log struct {
		Entries []entry `json:"entries"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&log))
	sum := sha256.Sum256([]byte(body))
	for _, e := range log.Entries {
		if e.BodySHA256 == hex.EncodeToString(sum[:]) {
			return &e
		}
	}
	return nil
}

// waitLeaseLost polls the sidecar's view until the revoke has reached it.
func (d *dev) waitLeaseLost(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := direct.Get(d.control + "/v1/lease?taskId=dev-task")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return !strings.Contains(string(b), `"current":true`)
	}, 30*time.Second, 50*time.Millisecond, "the sidecar never saw the revoke")
}

// cleanEnv is this process's environment without proxy settings and
// without FENCEPOST_* variables, the start of what each client gets.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "NODE_USE_ENV_PROXY", goClientEnv,
			"SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS":
			continue
		}
		if strings.HasPrefix(k, "FENCEPOST_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// marker returns a unique request body for one client's write.
func marker(name string) string {
	return name + " " + rand.Text()
}

// repoRoot is the module root, two levels up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return root
}

// errText shortens a command error to one line.
func errText(err error) string {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return strings.TrimSpace(string(ee.Stderr))
	}
	return err.Error()
}
