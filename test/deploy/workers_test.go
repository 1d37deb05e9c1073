package deploy

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// exampleWorker is an example worker's shell script and the environment
// its manifest gives it.
type exampleWorker struct {
	where  string
	script string
	env    map[string]string
}

func exampleWorkers(t *testing.T) []exampleWorker {
	t.Helper()
	var out []exampleWorker
	for name, wl := range workloads(t, k8sObjects(t)) {
		for _, c := range wl.Template.Spec.Containers {
			if isFencepostImage(c.Image) || len(c.Command) < 2 || c.Command[len(c.Command)-1] != "-c" {
				continue
			}
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
			require.Len(t, c.Args, 1, "%s container %s: one script", name, c.Name)
			out = append(out, exampleWorker{where: name + " container " + c.Name, script: c.Args[0], env: env})
		}
	}
	c := loadCompose(t)
	for _, name := range sortedNames(c.Services) {
		s := c.Services[name]
		if !strings.HasPrefix(s.NetworkMode, "service:") || len(s.Command) != 1 || isFencepostImage(s.Image) {
			continue
		}
		// Compose turns $$ into $; a single $ would be compose's own
		// interpolation, which these scripts must not rely on.
		script := strings.ReplaceAll(s.Command[0], "$$", "\\x00")
		require.NotContains(t, script, "$", "compose.yaml service %s: escape $ as $$ in the script", name)
		out = append(out, exampleWorker{where: "compose.yaml service " + name, script: strings.ReplaceAll(script, "\\x00", "$"), env: s.Environment})
	}
	require.Len(t, out, 2, "want the k8s and the compose example worker")
	return out
}

// fencedWrites counts the writes fenced has appended to its log.
func fencedWrites(t *testing.T, d devStack) int {
	t.Helper()
	resp, err := http.Get(d.url(d.fenced, "/v1/log"))
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var log struct {
		Entries []json.RawMessage `json:"entries"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&log))
	return len(log.Entries)
}

// checkWorkerScripts runs each example worker's script against the dev
// stack, its loopback addresses moved to the dev ports, until fenced has
// logged its writes; then stops it with SIGTERM and expects a clean exit
// (the script gives its task back). The dev sidecar holds the task the
// scripts derive, so they find it current or acquire it.
func checkWorkerScripts(t *testing.T, d devStack) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	for _, w := range exampleWorkers(t) {
		t.Run(w.where, func(t *testing.T) {
			env := []string{"PATH=" + os.Getenv("PATH"), "HOSTNAME=w1", "TASK_ID=" + devTask, "HOME=" + t.TempDir()}
			for k, v := range w.env {
				switch k {
				case "HTTP_PROXY", "http_proxy":
					require.Equal(t, "7480", portOf(v), "%s: %s", w.where, k)
					v = "http://127.0.0.1:" + strconv.Itoa(d.proxy)
				case "NO_PROXY", "no_proxy":
					// The control API is reached as localhost below, so
					// fenced on 127.0.0.1 still goes through the proxy.
					v = "localhost"
				case "SIDECAR_CONTROL":
					require.Equal(t, "7481", portOf(v), "%s: %s", w.where, k)
					v = "http://localhost:" + strconv.Itoa(d.control)
				case "FENCED_URL":
					require.Equal(t, "7490", portOf(v), "%s: %s", w.where, k)
					v = "http://127.0.0.1:" + strconv.Itoa(d.fenced)
				case "TASK_ID":
					continue
				}
				env = append(env, k+"="+v)
			}
			// The dev sidecar runs in one-task mode: it is ready only while
			// it holds devTask, which the previous script gave back.
			body := strings.NewReader(`{"taskId":"` + devTask + `","create":true}`)
			resp, err := http.Post(d.url(d.control, "/v1/acquire"), "application/json", body)
			require.NoError(t, err)
			_ = resp.Body.Close()
			before := fencedWrites(t, d)
			var out syncBuffer
			cmd := exec.Command("/bin/sh", "-c", w.script)
			cmd.Env = env
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			require.NoError(t, cmd.Start())
			pid := cmd.Process.Pid
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			defer func() { _ = syscall.Kill(-pid, syscall.SIGKILL) }() // the script's sleep and curl children

			deadline := time.Now().Add(20 * time.Second)
			for fencedWrites(t, d) < before+2 {
				select {
				case err := <-done:
					t.Fatalf("%s: the script exited early (%v):\n%s", w.where, err, out.String())
				default:
				}
				require.True(t, time.Now().Before(deadline), "%s: fenced logged no writes from the script in 20s:\n%s", w.where, out.String())
				time.Sleep(100 * time.Millisecond)
			}
			require.NoError(t, syscall.Kill(pid, syscall.SIGTERM))
			select {
			case err := <-done:
				require.NoError(t, err, "%s: the script should give the task back and exit 0 on SIGTERM:\n%s", w.where, out.String())
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: the script ignored SIGTERM for 10s:\n%s", w.where, out.String())
			}
			resp, err = http.Get(d.url(d.control, "/v1/lease?taskId="+devTask))
			require.NoError(t, err)
			var reply struct {
				Leases []struct {
					Current bool `json:"current"`
				} `json:"leases"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&reply))
			_ = resp.Body.Close()
			for _, v := range reply.Leases {
				require.False(t, v.Current, "%s: the task is still held after SIGTERM (no give back):\n%s", w.where, out.String())
			}
			t.Logf("%s output:\n%s", w.where, out.String())
		})
	}
}
