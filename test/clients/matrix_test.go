package clients

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/proxy"
)

// result is what every client prints.
type result struct {
	Status  int     `json:"status"`
	CType   string  `json:"ctype"`
	Retry   string  `json:"retry"`
	Body    string  `json:"body"`
	FirstMs float64 `json:"first_ms"`
	TotalMs float64 `json:"total_ms"`
	Error   string  `json:"error"`
}

// client is one real client of the matrix.
type client struct {
	name string
	// host is the name the client calls the upstream by. Go's
	// ProxyFromEnvironment never proxies "localhost" or loopback IPs (a
	// real worker calls real hosts), so the Go client calls
	// "upstream.localhost", which the sidecar dials on 127.0.0.1.
	host string
	// run calls url in mode (write, sse, hold) and reports the outcome.
	run func(t *testing.T, env []string, mode, url string) result
}

// need reports a missing tool: a failure as root (test/install-clients.sh installs
// every client in CI), a skip otherwise.
func need(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Geteuid() == 0 {
		t.Fatalf("%s is missing although the tests run as root (test/install-clients.sh installs it): %v", what, err)
	}
	t.Skipf("%s is not installed (run test/install-clients.sh as root): %v", what, err)
}

// runJSON runs a client that prints one result object.
func runJSON(t *testing.T, env []string, argv ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%v: %s", argv, stderr.String())
	var r result
	require.NoError(t, json.Unmarshal(out, &r), "%v printed %q (stderr %s)", argv, out, stderr.String())
	return r
}

// runCurl is curl as a user types it; HTTPS_PROXY and CURL_CA_BUNDLE come
// from the environment.
func runCurl(t *testing.T, env []string, mode, url string) result {
	t.Helper()
	dir := t.TempDir()
	hdr, body := filepath.Join(dir, "h"), filepath.Join(dir, "b")
	args := []string{"-sS", "-N", "-D", hdr, "-o", body, "-w", "%{http_code} %{time_starttransfer} %{time_total}"}
	switch mode {
	case "write":
		args = append(args, "-X", "POST", "--data-binary", "amount=5")
	case "hold":
		args = append(args, "-X", "POST", "--data-binary", "go")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "curl", append(args, url)...)
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var r result
	if err != nil {
		r.Error = fmt.Sprintf("%v: %s", err, stderr.String())
	}
	f := strings.Fields(string(out))
	if len(f) == 3 {
		r.Status, _ = strconv.Atoi(f[0])
		first, _ := strconv.ParseFloat(f[1], 64)
		total, _ := strconv.ParseFloat(f[2], 64)
		r.FirstMs, r.TotalMs = first*1000, total*1000
	}
	b, _ := os.ReadFile(body)
	r.Body = string(b)
	h, _ := os.ReadFile(hdr)
	// The header file holds the CONNECT reply first, then the response.
	for _, line := range strings.Split(string(h), "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		switch {
		case ok && strings.EqualFold(k, "content-type"):
			r.CType = strings.TrimSpace(v)
		case ok && strings.EqualFold(k, "x-should-retry"):
			r.Retry = strings.TrimSpace(v)
		}
	}
	return r
}

var (
	nodeOnce sync.Once
	nodeBin  string
	nodeErr  error
	goOnce   sync.Once
	goBin    string
	goErr    error
)

func nodePath(t *testing.T) string {
	nodeOnce.Do(func() {
		out, err := exec.Command("bash", "../install-node24.sh").Output()
		nodeBin, nodeErr = strings.TrimSpace(string(out)), err
	})
	need(t, "Node 24 (test/install-node24.sh)", nodeErr)
	return nodeBin
}

func goClientPath(t *testing.T) string {
	goOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fencepost-goclient-")
		if err != nil {
			goErr = err
			return
		}
		goBin = filepath.Join(dir, "goclient")
		out, err := exec.Command("go", "build", "-o", goBin, "./goclient").CombinedOutput()
		if err != nil {
			goErr = fmt.Errorf("%v: %s", err, out)
		}
	})
	require.NoError(t, goErr)
	return goBin
}

func python(t *testing.T, module string) {
	t.Helper()
	need(t, "Debian's python3-"+module, exec.Command("/usr/bin/python3", "-c", "import "+module).Run())
}

func clients() []client {
	py := func(lib string) func(*testing.T, []string, string, string) result {
		return func(t *testing.T, env []string, mode, url string) result {
			python(t, lib)
			return runJSON(t, env, "/usr/bin/python3", "scripts/client.py", lib, mode, url)
		}
	}
	node := func(lib string) func(*testing.T, []string, string, string) result {
		return func(t *testing.T, env []string, mode, url string) result {
			return runJSON(t, env, nodePath(t), "scripts/client.mjs", lib, mode, url)
		}
	}
	return []client{
		{name: "curl", host: "127.0.0.1", run: func(t *testing.T, env []string, mode, url string) result {
			_, err := exec.LookPath("curl")
			need(t, "curl", err)
			return runCurl(t, env, mode, url)
		}},
		{name: "python-requests", host: "127.0.0.1", run: py("requests")},
		{name: "python-httpx", host: "127.0.0.1", run: py("httpx")},
		{name: "node-fetch", host: "127.0.0.1", run: node("fetch")},
		{name: "node-http", host: "127.0.0.1", run: node("http")},
		{name: "go-net-http", host: "upstream.localhost", run: func(t *testing.T, env []string, mode, url string) result {
			return runJSON(t, env, goClientPath(t), mode, url)
		}},
	}
}

func TestRealClients(t *testing.T) {
	st := startStack(t, nil)
	env := append(baseEnv(), st.env...)
	for _, c := range clients() {
		t.Run(c.name, func(t *testing.T) {
			// Resolve the client first, so a skip happens before any lease.
			c.run(t, env, "write", "http://127.0.0.1:1/probe")
			base := "https://" + c.host + ":" + st.tlsUp.port()
			task := "m-" + c.name
			epoch := st.acquire(t, task)

			// With the lease: stamped with exactly one token and one key.
			before := len(st.tlsUp.snapshot())
			r := c.run(t, env, "write", base+"/w")
			require.Equal(t, 201, r.Status, "%+v", r)
			require.Equal(t, "charged", r.Body)
			hits := st.tlsUp.snapshot()[before:]
			require.Len(t, hits, 1)
			require.Equal(t, []string{strconv.FormatUint(epoch, 10)}, hits[0].tokens, "exactly one token, the lease's epoch")
			require.Len(t, hits[0].keys, 1, "exactly one Idempotency-Key")

			// A Server-Sent Events read streams through interception: the
			// first event arrives a good while before the last.
			r = c.run(t, env, "sse", base+"/sse")
			require.Equal(t, 200, r.Status, "%+v", r)
			require.Equal(t, "data: 1\n\ndata: 2\n\n", r.Body)
			require.Less(t, r.FirstMs, r.TotalMs-1000, "the first event must not wait for the second: %+v", r)

			// Revoked: a 409 problem the client reads, nothing arrives.
			st.revoke(t, task)
			before = len(st.tlsUp.snapshot())
			r = c.run(t, env, "write", base+"/w")
			require.Equal(t, 409, r.Status, "%+v", r)
			require.Equal(t, api.ProblemContentType, r.CType)
			require.Equal(t, "false", r.Retry)
			var p api.Problem
			require.NoError(t, json.Unmarshal([]byte(r.Body), &p), r.Body)
			require.Contains(t, []string{api.ProblemTypeBase + proxy.CodeLeaseRevoked, api.ProblemTypeBase + proxy.CodeNoLease}, p.Type)
			require.Len(t, st.tlsUp.snapshot(), before, "nothing reaches the upstream")

			// A write whose response still streams is cut when the lease
			// is lost.
			st.acquire(t, task+"-2")
			done := make(chan result, 1)
			go func() { done <- c.run(t, env, "hold", base+"/hold") }()
			select {
			case <-st.tlsUp.held:
			case <-time.After(30 * time.Second):
				t.Fatal("the held write never arrived")
			}
			st.revoke(t, task+"-2")
			r = <-done
			require.NotContains(t, r.Body, "data: 2", "the stream must be cut, not completed: %+v", r)
			require.Less(t, r.TotalMs, 15000.0, "cut at once, not at the upstream's end: %+v", r)
		})
	}
}

// TestNodeFetchTunnelsPlainHTTP: Node's fetch with NODE_USE_ENV_PROXY
// sends even http:// URLs through CONNECT; the write is fenced all the same.
func TestNodeFetchTunnelsPlainHTTP(t *testing.T) {
	st := startStack(t, nil)
	env := append(baseEnv(), st.env...)
	node := nodePath(t)
	epoch := st.acquire(t, "plain")
	r := runJSON(t, env, node, "scripts/client.mjs", "fetch", "write", "http://127.0.0.1:"+st.plainUp.port()+"/w")
	require.Equal(t, 201, r.Status, "%+v", r)
	hits := st.plainUp.snapshot()
	require.Len(t, hits, 1)
	require.Equal(t, []string{strconv.FormatUint(epoch, 10)}, hits[0].tokens)
	st.revoke(t, "plain")
	r = runJSON(t, env, node, "scripts/client.mjs", "fetch", "write", "http://127.0.0.1:"+st.plainUp.port()+"/w")
	require.Equal(t, 409, r.Status, "%+v", r)
	require.Equal(t, "false", r.Retry)
	require.Len(t, st.plainUp.snapshot(), 1)
}
