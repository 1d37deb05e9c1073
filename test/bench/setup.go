package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// peerPackages maps each peer binary the harness runs to its Debian package.
var peerPackages = []struct{ bin, pkg string }{
	{"etcd", "etcd-server"},
	{"etcdctl", "etcd-client"},
	{"nginx", "nginx"},
	// squid-openssl, not Debian's GnuTLS squid: the ssl-bump peer needs
	// its certificate generator, and its squid serves the plain peer too.
	{"squid", "squid-openssl"},
	{squidCertgen, "squid-openssl"},
}

// squidCertgen is squid-openssl's certificate generator, which only that
// build ships.
const squidCertgen = "/usr/lib/squid/security_file_certgen"

// binPath finds a peer binary on PATH or in /usr/sbin (root's PATH on a
// fresh machine may lack it).
func binPath(name string) string {
	if filepath.IsAbs(name) {
		if _, err := os.Stat(name); err == nil {
			return name
		}
		return ""
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin", "/sbin"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// installPeers installs the Debian packages of missing peers. It needs root
// and waits up to ten minutes for another apt run to release its lock.
func installPeers() error { return installPackages(peerPackages) }

// installPackages installs the Debian packages of the binaries in peers
// that are missing, as installPeers does.
func installPackages(peers []struct{ bin, pkg string }) error {
	var need []string
	for _, p := range peers {
		if binPath(p.bin) == "" && !slices.Contains(need, p.pkg) {
			need = append(need, p.pkg)
		}
	}
	if len(need) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("missing %s and not root: install them with apt-get", strings.Join(need, ", "))
	}
	logf("installing %s with apt-get", strings.Join(need, " "))
	lock := "-o DPkg::Lock::Timeout=600"
	script := fmt.Sprintf("apt-get %s update -qq && DEBIAN_FRONTEND=noninteractive apt-get %s install -y -qq --no-install-recommends %s",
		lock, lock, strings.Join(need, " "))
	cmd := exec.Command("sh", "-c", script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("apt-get: %w\n%s", err, out)
	}
	// Debian may start the packaged services; the harness leaves them alone
	// (it stops only what it started) and runs its own instances on free
	// loopback ports.
	for _, p := range peers {
		if binPath(p.bin) == "" {
			return fmt.Errorf("%s still missing after installing %s", p.bin, p.pkg)
		}
	}
	return nil
}

// buildFencepost builds ./cmd/fencepost of the main module (two levels up)
// into dir and returns the binary's path and a note on what was built.
// When the working tree does not build (someone is mid-edit), it builds
// the last commit instead, from a `git archive` export inside dir.
func buildFencepost(root, dir string) (string, string, error) {
	out := filepath.Join(dir, "fencepost")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/fencepost")
	cmd.Dir = root
	b, err := cmd.CombinedOutput()
	if err == nil {
		return out, "the working tree at " + gitDescribe(root), nil
	}
	werr := fmt.Errorf("go build ./cmd/fencepost: %w\n%s", err, tailString(string(b), 600))
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", "", werr
	}
	export := exec.Command("sh", "-c", "git -C \"$1\" archive HEAD | tar -x -C \"$2\"", "sh", root, src)
	if b, err := export.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("%v; git archive: %v %s", werr, err, b)
	}
	cmd = exec.Command("go", "build", "-o", out, "./cmd/fencepost")
	cmd.Dir = src
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("%v; HEAD: %v\n%s", werr, err, tailString(string(b), 600))
	}
	return out, "the last commit " + gitDescribe(root) + " (the working tree did not build)", nil
}

// gitDescribe names the checked-out commit, marked when the tree has
// uncommitted changes.
func gitDescribe(root string) string {
	out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output()
	if err != nil {
		return "(unknown commit)"
	}
	return strings.TrimSpace(string(out))
}

// hasSubcommand reports whether the fencepost binary lists sub in its help.
func hasSubcommand(bin, sub string) bool {
	out, _ := exec.Command(bin, "help").CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == sub {
			return true
		}
	}
	return strings.Contains(string(out), "<"+sub+"|") || strings.Contains(string(out), "|"+sub+"|") ||
		strings.Contains(string(out), "|"+sub+">")
}

// Machine describes the host a run was made on.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel"`
	MemoryMiB int64  `json:"memoryMiB"`
	Kernel    string `json:"kernel"`
	Go        string `json:"go"`
	Etcd      string `json:"etcd"`
	Nginx     string `json:"nginx"`
	Squid     string `json:"squid"`
	LoadAvg   string `json:"loadAvgAtStart"`
	LoadEnd   string `json:"loadAvgAtEnd"`
	Built     string `json:"fencepostBuiltFrom"`
	StartedAt string `json:"startedAt"`
}

// describeMachine gathers nproc, the CPU model, memory and peer versions.
func describeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), StartedAt: time.Now().UTC().Format(time.RFC3339)}
	m.CPUModel = firstField("/proc/cpuinfo", "model name")
	if v := firstField("/proc/meminfo", "MemTotal"); v != "" {
		var kib int64
		fmt.Sscanf(v, "%d", &kib)
		m.MemoryMiB = kib / 1024
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.LoadAvg = loadAvg()
	m.Etcd = versionLine(binPath("etcd"), "--version")
	m.Nginx = versionLine(binPath("nginx"), "-v")
	m.Squid = versionLine(binPath("squid"), "-v")
	return m
}

// firstField returns the value of the first "key : value" line in path.
func firstField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// versionLine runs bin with flag and returns the first output line.
func versionLine(bin, flag string) string {
	if bin == "" {
		return "not installed"
	}
	out, _ := exec.Command(bin, flag).CombinedOutput()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(line)
}

// loadAvg returns the three load averages from /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// logf prints a progress line to stderr with the elapsed time.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(startTime).Seconds(), fmt.Sprintf(format, args...))
}

// startTime is when the harness started, for progress lines.
var startTime = time.Now()
