package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// wlProxy names workload 5.
const wlProxy = "5 proxy path"

// Proxy path labels.
const (
	pathDirect  = "direct"
	pathSidecar = "fencepost sidecar"
	pathNginx   = "nginx"
	pathSquid   = "squid"
)

// httpTarget is one way of reaching the upstream: where to connect and the
// request line's form (origin-form for direct and the reverse proxy,
// absolute-form for the forward proxies).
type httpTarget struct {
	name     string
	addr     string // host:port the load generator connects to
	absolute bool
	proc     *proc // the proxy process, for RSS; nil for direct
	tree     bool  // RSS includes the process's children (nginx workers)
	// tls, when set, is the load generator's TLS to addr: only direct
	// in the TLS pass, where the upstream speaks HTTPS (proxyTLS).
	tls *tls.Config
}

// request builds the raw bytes of one request to t. upstream is the
// origin's host:port.
func (t httpTarget) request(method, upstream string, body []byte) []byte {
	target := "/bench"
	host := t.addr
	if t.absolute {
		target, host = "http://"+upstream+"/bench", upstream
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: fencepost-bench\r\n", method, target, host)
	if body != nil {
		fmt.Fprintf(&b, "Content-Type: application/octet-stream\r\nContent-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	b.Write(body)
	return []byte(b.String())
}

// rawConn is one keep-alive connection of the load generator: it writes a
// prebuilt request and parses the response with fasthttp's parser.
type rawConn struct {
	addr string
	tls  *tls.Config // nil: plain TCP
	c    net.Conn
	br   *bufio.Reader
	resp fasthttp.Response
}

// roundTrip sends req and reads one response, reconnecting when the
// connection is gone. Only a 200 counts as success.
func (rc *rawConn) roundTrip(req []byte) error {
	if rc.c == nil {
		c, err := net.DialTimeout("tcp", rc.addr, 2*time.Second)
		if err != nil {
			return err
		}
		if rc.tls != nil {
			tc := tls.Client(c, rc.tls)
			_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
			if err := tc.Handshake(); err != nil {
				c.Close()
				return err
			}
			c = tc
		}
		rc.c, rc.br = c, bufio.NewReaderSize(c, 16<<10)
	}
	_ = rc.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := rc.c.Write(req); err != nil {
		rc.close()
		return err
	}
	rc.resp.Reset()
	if err := rc.resp.Read(rc.br); err != nil {
		rc.close()
		return err
	}
	if rc.resp.ConnectionClose() {
		rc.close()
	}
	if code := rc.resp.StatusCode(); code != 200 {
		return fmt.Errorf("HTTP %d: %.200s", code, rc.resp.Body())
	}
	return nil
}

// close drops the connection; the next round trip dials again.
func (rc *rawConn) close() {
	if rc.c != nil {
		rc.c.Close()
		rc.c = nil
	}
}

// httpLoad runs a closed loop (rate 0) or an open loop at rate against t
// with c connections, and samples the proxy's RSS every 100 ms.
func httpLoad(t httpTarget, req []byte, c int, rate float64, d time.Duration) (Measure, float64) {
	conns := make([]*rawConn, c)
	for i := range conns {
		conns[i] = &rawConn{addr: t.addr, tls: t.tls}
	}
	defer func() {
		for _, rc := range conns {
			rc.close()
		}
	}()
	var peak int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if t.proc != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk := time.NewTicker(100 * time.Millisecond)
			defer tk.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tk.C:
					peak = max(peak, t.rss())
				}
			}
		}()
	}
	op := func(_ context.Context, w int) error { return conns[w].roundTrip(req) }
	m := metered(t.pids(), func() Measure {
		if rate > 0 {
			return openLoop(c, rate, d, op)
		}
		return closedLoop(c, d, 50_000_000, op)
	})
	close(stop)
	wg.Wait()
	return m, float64(peak) / 1024
}

// pids lists the proxy's processes (with nginx's workers and squid's
// kid), for CPU metering; none for direct.
func (t httpTarget) pids() []int {
	if t.proc == nil || t.proc.exited() {
		return nil
	}
	return append([]int{t.proc.pid()}, childPIDs(t.proc.pid())...)
}

// rss returns the proxy's resident set in KiB.
func (t httpTarget) rss() int64 {
	if t.proc == nil || t.proc.exited() {
		return 0
	}
	if t.tree {
		return treeRSSKiB(t.proc.pid())
	}
	r, _ := rssKiB(t.proc.pid())
	return r
}

// startUpstream re-runs the harness binary in upstream mode on a free port.
func startUpstream(dir string, ps *ports) (*proc, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ps.next())
	p, err := startProc("upstream", filepath.Join(dir, "upstream.log"), self, "upstream", addr)
	if err != nil {
		return nil, "", err
	}
	return p, addr, waitFor(10*time.Second, "upstream", func() error { return tcpUp(addr) })
}

// startNginx runs nginx as a reverse proxy to upstream with a keep-alive
// pool to it, one worker per core, access log off. With up set the
// upstream speaks HTTPS and nginx originates TLS to it, verified and with
// session reuse, as the sidecar does (proxyTLS).
func startNginx(dir, upstream string, up *upstreamTLS, ps *ports) (*proc, string, error) {
	addr := fmt.Sprintf("127.0.0.1:%d", ps.next())
	d := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, "", err
	}
	conf := fmt.Sprintf(`user root;
daemon off;
master_process on;
worker_processes auto;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 4096; multi_accept on; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  keepalive_requests 1000000;
  upstream origin { server %[2]s; keepalive 128; keepalive_requests 1000000; }
  server {
    listen %[3]s reuseport;
    location / {
      proxy_pass %[4]s;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
%[5]s    }
  }
}
`, d, upstream, addr, up.nginxPass(), up.nginxTLS())
	cf := filepath.Join(d, "nginx.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		return nil, "", err
	}
	p, err := startProc("nginx", filepath.Join(d, "stdout.log"), binPath("nginx"), "-c", cf, "-p", d, "-e", filepath.Join(d, "error.log"))
	if err != nil {
		return nil, "", err
	}
	return p, addr, waitFor(10*time.Second, "nginx", func() error {
		if p.exited() {
			return errors.New(p.tail(800))
		}
		return tcpUp(addr)
	})
}

// startSquid runs squid in the foreground (-N) as a forward proxy with
// caching off, logging off and keep-alive on both sides.
func startSquid(dir string, ps *ports) (*proc, string, error) {
	addr := fmt.Sprintf("127.0.0.1:%d", ps.next())
	return runSquid(filepath.Join(dir, "squid"), addr, "http_port "+addr+"\n", nil)
}

// runSquid writes squid.conf in d (head first: the listening port and
// anything before the common settings), runs prepare, then squid -N.
func runSquid(d, addr, head string, prepare func() error) (*proc, string, error) {
	if err := os.MkdirAll(d, 0o777); err != nil {
		return nil, "", err
	}
	conf := head + fmt.Sprintf(`acl localnet src 127.0.0.1/32
http_access allow localnet
http_access deny all
cache deny all
cache_mem 8 MB
access_log none
cache_store_log none
cache_log %[1]s/cache.log
pid_filename %[1]s/squid.pid
coredump_dir %[1]s
pinger_enable off
via off
forwarded_for delete
shutdown_lifetime 1 seconds
client_persistent_connections on
server_persistent_connections on
max_filedescriptors 8192
`, d)
	cf := filepath.Join(d, "squid.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		return nil, "", err
	}
	if prepare != nil {
		if err := prepare(); err != nil {
			return nil, "", err
		}
	}
	// squid drops root for the "proxy" user; let it write its own files.
	_ = exec.Command("chown", "-R", "proxy", d).Run()
	p, err := startProc("squid", filepath.Join(d, "stdout.log"), binPath("squid"), "-N", "-f", cf)
	if err != nil {
		return nil, "", err
	}
	return p, addr, waitFor(15*time.Second, "squid", func() error {
		if p.exited() {
			b, _ := os.ReadFile(filepath.Join(d, "cache.log"))
			return fmt.Errorf("%s %s", p.tail(800), tailString(string(b), 800))
		}
		return tcpUp(addr)
	})
}

// tailString returns the last n bytes of s.
func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// stopProxy stops a proxy process by PID: SIGQUIT for nginx (graceful,
// the master reaps its workers), SIGTERM otherwise.
func stopProxy(t httpTarget) {
	if t.proc == nil {
		return
	}
	sig := syscall.SIGTERM
	if t.name == pathNginx {
		sig = syscall.SIGQUIT
	}
	t.proc.stop(sig, 10*time.Second)
}
