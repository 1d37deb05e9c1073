package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence"
)

// lockedBuffer is an io.Writer the dev goroutine writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startDevBanner runs serveDev on free ports from the current directory
// and returns its banner once printed.
func startDevBanner(t *testing.T, cfg *config.Dev) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &lockedBuffer{}
	done := make(chan error, 1)
	go func() { done <- serveDev(ctx, cfg, zap.NewNop(), out) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	deadline := time.Now().Add(45 * time.Second)
	for !strings.Contains(out.String(), "# 409 problem+json") {
		select {
		case err := <-done:
			t.Fatalf("dev stopped early: %v\n%s", err, out.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "no banner within 45s:\n%s", out.String())
		time.Sleep(20 * time.Millisecond)
	}
	return out.String()
}

// bannerLine returns the banner's first line containing s, split into words.
func bannerLine(t *testing.T, banner, s string) []string {
	t.Helper()
	for _, l := range strings.Split(banner, "\n") {
		if strings.Contains(l, s) {
			return strings.Fields(l)
		}
	}
	t.Fatalf("banner has no line with %q:\n%s", s, banner)
	return nil
}

// The banner's ctl line works as printed from any directory (issue 29,
// item 4): dev started from one directory with a relative data_dir, the
// line run from another. Dev also stamps the token's signature on the
// user's own signature_hosts (item 9), and on no other host.
func TestDevBannerFromAnyDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node, a sidecar and fenced")
	}
	var (
		mu   sync.Mutex
		sigs = map[string]string{} // host → the X-Fencing-Signature it received
	)
	validator := func() *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			sigs[r.Host] = r.Header.Get(fence.HeaderSignature)
			mu.Unlock()
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	mine, other := validator(), validator()
	mineHost := strings.TrimPrefix(mine.URL, "http://")

	startDir, otherDir := t.TempDir(), t.TempDir()
	t.Chdir(startDir)
	cfg := config.DefaultDev()
	cfg.DataDir = filepath.Join("data", "dev") // relative to startDir
	cfg.Ports = config.DevPorts{Raft: freeLoopbackPort(t)}
	cfg.Log.Format = "json"
	cfg.SignatureHosts = []string{mineHost}
	banner := startDevBanner(t, cfg)

	// The node's own ports are never proxy targets (issue 30): the raft
	// port, which dev adds to refuse_targets itself, and the cluster API.
	t.Run("OwnPortsRefused", func(t *testing.T) {
		proxyURL, err := url.Parse(bannerLine(t, banner, "sidecar proxy")[2])
		require.NoError(t, err)
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
		apiHost := strings.TrimPrefix(bannerLine(t, banner, "cluster API")[2], "https://")
		_, apiPort, err := net.SplitHostPort(apiHost)
		require.NoError(t, err)
		for _, target := range []string{
			"http://127.0.0.1:" + strconv.Itoa(cfg.Ports.Raft) + "/",
			"http://localhost:" + strconv.Itoa(cfg.Ports.Raft) + "/",
			"http://127.0.0.1:" + apiPort + "/v1/tasks",
		} {
			resp, err := client.Post(target, "application/json", strings.NewReader(`{}`))
			require.NoError(t, err, target)
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			require.Equal(t, http.StatusForbidden, resp.StatusCode, "%s: %s", target, body)
			require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), target)
			require.Contains(t, string(body), "target-forbidden", target)
		}
	})

	// First, while the sidecar holds dev-task: the ctl line revokes it.
	t.Run("SignatureHosts", func(t *testing.T) {
		proxyURL, err := url.Parse(bannerLine(t, banner, "sidecar proxy")[2])
		require.NoError(t, err)
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
		for _, srv := range []*httptest.Server{mine, other} {
			resp, err := client.Post(srv.URL+"/charges", "application/json", strings.NewReader(`{"v":1}`))
			require.NoError(t, err)
			_ = resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, srv.URL)
		}
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, sigs[mineHost], "a host in signature_hosts gets the token's signature")
		require.Contains(t, sigs, strings.TrimPrefix(other.URL, "http://"))
		require.Empty(t, sigs[strings.TrimPrefix(other.URL, "http://")], "a host not listed never sees the signature")
		require.Contains(t, banner, "signed for now: "+mineHost)
	})

	t.Run("CtlLineFromAnotherDirectory", func(t *testing.T) {
		t.Chdir(otherDir)
		words := bannerLine(t, banner, " tasks revoke ")
		require.Equal(t, "ctl", words[1], words)
		for i, w := range words {
			if w == "--ca" || w == "--cert" || w == "--key" {
				p := words[i+1]
				require.True(t, filepath.IsAbs(p), "%s %s is relative: it works only from the directory dev started in", w, p)
				_, err := os.Stat(p)
				require.NoError(t, err, "%s %s", w, p)
			}
		}
		code, out, errOut := runCLI(t, words[1:]...)
		require.Equal(t, exitOK, code, "%s\n%s", out, errOut)

		// The banner's next lines: take the lease back, then a write of
		// its own action goes through.
		control := bannerLine(t, banner, "sidecar control")[2]
		resp, err := http.Post(control+"/v1/acquire", "application/json", strings.NewReader(`{"taskId":"`+cfg.Task+`"}`))
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		proxyURL, err := url.Parse(bannerLine(t, banner, "sidecar proxy")[2])
		require.NoError(t, err)
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
		write := bannerLine(t, banner, "fenced service")[2] + "/v1/tasks/" + cfg.Task + "/writes"
		req, err := http.NewRequest("POST", write, strings.NewReader("step 3"))
		require.NoError(t, err)
		req.Header.Set("X-Fencing-Action-Id", "step-3")
		resp, err = client.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusCreated, resp.StatusCode, "the new owner's write")
		// Every file the banner names (certificates, the CA bundle) is absolute.
		paths := 0
		for _, w := range strings.Fields(banner) {
			if _, v, ok := strings.Cut(w, "="); ok {
				w = v
			}
			if strings.Contains(w, cfg.DataDir) {
				require.True(t, filepath.IsAbs(w), "banner path %s is relative", w)
				paths++
			}
		}
		require.Greater(t, paths, 5)
	})
}

// freeLoopbackPort is a port free on 127.0.0.1 a moment ago, for a
// setting that must name its port in advance.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// A port another process holds: the error names the flag that moves it
// (issue 29, item 5).
func TestDevPortTakenNamesTheFlag(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = ln.Close() }()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	code, _, errOut := runCLI(t, "dev", "--data-dir", t.TempDir(), "--ports-http", "0", "--ports-raft", "0",
		"--ports-proxy", port, "--ports-control", "0", "--ports-fenced", "0", "--ports-fenced-tls", "0", "--ports-console", "0")
	require.Equal(t, exitRuntime, code, errOut)
	require.Equal(t, "fencepost dev: config: ports.proxy: cannot listen on 127.0.0.1:"+port+
		": address already in use (move it with --ports-proxy)\n", errOut)
}
