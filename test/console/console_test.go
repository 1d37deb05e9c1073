package console

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// proc is a fencepost process the test started; it is stopped by its pid.
type proc struct {
	lines chan string
	out   bytes.Buffer
}

// buildFencepost builds the binary once per test into a temporary dir.
func buildFencepost(t *testing.T) string {
	t.Helper()
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH")
	}
	bin := filepath.Join(t.TempDir(), "fencepost")
	cmd := exec.Command(gotool, "build", "-o", bin, "./cmd/fencepost")
	cmd.Dir = repoRoot(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	return filepath.Dir(filepath.Dir(dir))
}

// start runs bin with args until the test ends (SIGINT, then SIGKILL).
func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &proc{lines: make(chan string, 256)}
	cmd.Stderr = &p.out
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // nobody reads the rest
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	return p
}

// waitLine returns the first submatch of re in the process's output.
func (p *proc) waitLine(t *testing.T, re *regexp.Regexp, within time.Duration) []string {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case l := <-p.lines:
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-deadline:
			t.Fatalf("no line matching %s within %s; stderr:\n%s", re, within, p.out.String())
		}
	}
}

// stack is a running dev with a reader's console beside it.
type stack struct {
	console, readerConsole string
	shots                  string
}

var (
	consoleLine = regexp.MustCompile(`^\s*console\s+(http://\S+)`)
	ctlLine     = regexp.MustCompile(`ctl --cluster (\S+) --ca (\S+) --cert (\S+) --key (\S+) tasks revoke`)
	readerLine  = regexp.MustCompile(`^fencepost console: (http://\S+) \(as reader/viewer\)`)
)

func startStack(t *testing.T) *stack {
	t.Helper()
	chromium := findChromium()
	if chromium == "" {
		t.Skip("chromium is not installed (apt-get install chromium; test/run.sh installs it as root)")
	}
	bin := buildFencepost(t)
	data := filepath.Join(t.TempDir(), "data")
	dev := start(t, bin, "dev", "--data-dir", data, "--ports-http=0", "--ports-raft=0", "--ports-proxy=0",
		"--ports-control=0", "--ports-fenced=0", "--ports-fenced-tls=0", "--ports-console=0", "--log-format=json")
	s := &stack{console: dev.waitLine(t, consoleLine, 2*time.Minute)[1]}
	ctl := dev.waitLine(t, ctlLine, time.Minute)
	cluster, ca := ctl[1], ctl[2]
	// A reader's certificate from dev's CA, and a console that uses it.
	certDir := t.TempDir()
	out, err := exec.Command(bin, "tls", "cert", "create", "--reader", "--name", "viewer", "--dir", certDir,
		"--ca", ca, "--ca-key", filepath.Join(filepath.Dir(ca), "ca-key.pem")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	rc := start(t, bin, "console", "--listen", "127.0.0.1:0", "--cluster", cluster, "--ca", ca,
		"--cert", filepath.Join(certDir, "reader-viewer.pem"), "--key", filepath.Join(certDir, "reader-viewer-key.pem"))
	s.readerConsole = rc.waitLine(t, readerLine, 30*time.Second)[1]
	s.shots = os.Getenv("CONSOLE_SCREENSHOTS")
	if s.shots == "" {
		s.shots = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(s.shots, 0o755))
	return s
}

func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser returns a chromedp context of a fresh headless chromium.
func browser(t *testing.T, width, height int) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(findChromium()),
		chromedp.NoSandbox, // CI runs as root, where chromium's sandbox refuses to start
		chromedp.WindowSize(width, height),
		chromedp.Flag("disable-gpu", true),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	// chromedp reports DOM events it has no handler for (the dialog's
	// top layer) as errors; they are not the test's.
	quiet := func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); !strings.Contains(msg, "unhandled node event") {
			log.Print(msg)
		}
	}
	ctx, cancelB := chromedp.NewContext(actx, chromedp.WithErrorf(quiet))
	ctx, cancelC := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelC(); cancelB(); cancelA() })
	return ctx
}

// settled waits until the page took its first live update (the console
// redraws every page once when its event stream opens), so a read of the
// page is not raced by that redraw.
func settled() chromedp.Action {
	return chromedp.Poll(`document.getElementById("live").textContent.startsWith("updated")`, nil,
		chromedp.WithPollingTimeout(20*time.Second))
}

func (s *stack) shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	var png []byte
	require.NoError(t, chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)))
	require.NoError(t, os.WriteFile(filepath.Join(s.shots, name+".png"), png, 0o644))
}

// TestConsoleShowsTheTaskAndRevokesItLive: the operator's console lists
// dev-task with its epoch; on its page a revoke, confirmed in the dialog
// that names task and epoch, changes the lease's status and the timeline
// without a reload; every page renders and is saved as a screenshot.
func TestConsoleShowsTheTaskAndRevokesItLive(t *testing.T) {
	s := startStack(t)
	ctx := browser(t, 1280, 900)
	var epoch, question, status string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(s.console+"tasks"),
		settled(),
		chromedp.Text(`#row-dev-task .epoch`, &epoch, chromedp.ByQuery),
	))
	require.Regexp(t, `^\d+$`, epoch, "dev-task is listed with its epoch")
	s.shot(t, ctx, "tasks")

	for _, page := range []string{"workers", "cluster", "health"} {
		require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(s.console+page), settled()))
		s.shot(t, ctx, page)
	}
	var workers string
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(s.console+"workers"), chromedp.Text(`main`, &workers, chromedp.ByQuery)))
	require.Contains(t, workers, "sidecar/dev-worker", "the sidecar's identity is listed")

	var marker bool
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(s.console+"tasks"),
		settled(),
		chromedp.Click(`#row-dev-task a`, chromedp.ByQuery),
		chromedp.WaitVisible(`#timeline`, chromedp.ByID),
		settled(),
		chromedp.Text(`#lease-status`, &status, chromedp.ByID),
		// A mark that survives only as long as the document does: a
		// reload would drop it.
		chromedp.Evaluate(`window.__noReload = true`, nil),
		chromedp.WaitEnabled(`#revoke`, chromedp.ByID),
		chromedp.Click(`#revoke`, chromedp.ByID),
		chromedp.WaitVisible(`#confirm`, chromedp.ByID),
		chromedp.Text(`#confirm-text`, &question, chromedp.ByID),
	))
	require.Equal(t, "active", status)
	require.Equal(t, fmt.Sprintf("Revoke the lease of task dev-task at epoch %s?", epoch), question)
	s.shot(t, ctx, "task-confirm")
	var timeline string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click(`#confirm-yes`, chromedp.ByID),
		chromedp.WaitVisible(`#lease-status.revoked`, chromedp.ByQuery),
		chromedp.Text(`#timeline`, &timeline, chromedp.ByID),
		chromedp.Evaluate(`window.__noReload === true`, &marker),
	))
	require.True(t, marker, "the page changed without a reload")
	require.Regexp(t, `revoke epoch `+epoch+` → revoked`, timeline)
	require.Contains(t, timeline, "console, operator/dev-operator", "the revoke names the console's credential")
	s.shot(t, ctx, "task")

	// The narrow window still shows the list.
	narrow := browser(t, 380, 800)
	require.NoError(t, chromedp.Run(narrow, chromedp.Navigate(s.console+"tasks"), settled()))
	s.shot(t, narrow, "tasks-narrow")
}

// TestReaderConsoleCannotRevoke: with a reader's certificate the actions
// are disabled, and a POST carrying the page's own CSRF token (what a
// script in the page could forge) is refused 403, as is one without it.
func TestReaderConsoleCannotRevoke(t *testing.T) {
	s := startStack(t)
	ctx := browser(t, 1280, 900)
	var disabled bool
	var note, csrf, epoch string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(s.readerConsole+"tasks/dev-task"),
		settled(),
		chromedp.Evaluate(`document.getElementById("revoke").disabled && document.getElementById("cancel").disabled && document.getElementById("signal").disabled`, &disabled),
		chromedp.Text(`#readonly-note`, &note, chromedp.ByID),
		chromedp.AttributeValue(`body`, "data-csrf", &csrf, nil, chromedp.ByQuery),
		chromedp.AttributeValue(`form[action$="/revoke"] input[name=epoch]`, "value", &epoch, nil, chromedp.ByQuery),
	))
	require.True(t, disabled, "a reader's console shows every action disabled")
	require.Contains(t, note, "reader/viewer")
	s.shot(t, ctx, "task-reader")

	var forged map[string]any
	require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(`fetch("/tasks/dev-task/revoke", {method: "POST",
		headers: {"Accept": "application/json", "X-CSRF-Token": %q, "Content-Type": "application/x-www-form-urlencoded"},
		body: "epoch=%s&confirm=yes"}).then(r => r.json().then(j => ({status: r.status, detail: j.detail})))`, csrf, epoch),
		&forged, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) })))
	require.Equal(t, float64(http.StatusForbidden), forged["status"], "%v", forged)
	require.Contains(t, forged["detail"], "reader/viewer")

	// From outside the browser: no cookie, no token.
	resp, err := http.PostForm(s.readerConsole+"tasks/dev-task/revoke", url.Values{"epoch": {epoch}, "confirm": {"yes"}})
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	// The lease is still active: nothing reached the cluster.
	var status string
	require.NoError(t, chromedp.Run(ctx, chromedp.Reload(), settled(), chromedp.Text(`#lease-status`, &status, chromedp.ByID)))
	require.Equal(t, "active", strings.TrimSpace(status))
}
