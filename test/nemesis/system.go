package nemesis

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/proxy"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/test/netfault"
)

// Timing of the system under test: the profile every task uses and raft's
// election settings. TTL 3 s with heartbeats every second and 1 s of grace
// is the shape of the black-box run the suite grew from.
const (
	TTL       = 3 * time.Second
	Heartbeat = time.Second
	Grace     = time.Second
	// Election is raft's election timeout (and the heartbeat timeout is a
	// third of it, the server's default ratio).
	Election = 300 * time.Millisecond
	// ReclaimBound is I7's bound for a task whose owner died: claimable
	// again within TTL + grace + election + 1 s of the death (README,
	// "Failure behaviour").
	ReclaimBound = TTL + Grace + Election + time.Second
	profile      = "nemesis"
)

// Member is one `fencepost server` process.
type Member struct {
	ID       string
	HTTP     string
	Raft     string
	Dir      string
	Gid      uint32
	proc     *netfault.Process
	bin      string
	join     []string
	tb       testing.TB
	restarts int
}

// Sidecar is one `fencepost sidecar` process and its worker's addresses.
type Sidecar struct {
	Name    string
	Proxy   string
	Control string
	// Health is the address of the worker's health URL the sidecar probes.
	Health string
	Gid    uint32
	proc   *netfault.Process
	args   []string
	tb     testing.TB
}

// System is the cluster, the sidecars, the validating downstream (`fencepost
// fenced`) and the raw recorder of one run.
type System struct {
	Members  []*Member
	Sidecars []*Sidecar
	Fenced   string // fenced's address
	Recorder *Recorder
	tb       testing.TB
	bin      string
	dir      string
}

// gidBase gives this run's processes group ids no other run shares.
func gidBase() uint32 { return 40000 + uint32(os.Getpid()%1000)*32 }

func port(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

// StartSystem starts members members and sidecars sidecars, fenced and the
// recorder, and waits until the cluster has a leader and every sidecar is
// serving.
func StartSystem(ctx context.Context, tb testing.TB, members, sidecars int, gids bool) *System {
	tb.Helper()
	s := &System{tb: tb, bin: netfault.Binary(tb), dir: tb.TempDir()}
	base := uint32(0)
	if gids {
		base = gidBase()
	}
	gid := func(i int) uint32 {
		if base == 0 {
			return 0
		}
		return base + uint32(i)
	}
	for i := range members {
		m := &Member{ID: fmt.Sprintf("n%d", i+1), HTTP: netfault.FreeAddr(tb), Raft: netfault.FreeAddr(tb),
			Gid: gid(i), bin: s.bin, tb: tb}
		m.Dir = filepath.Join(s.dir, m.ID)
		if i > 0 {
			m.join = []string{s.Members[0].HTTP}
		}
		s.Members = append(s.Members, m)
	}
	for i, m := range s.Members {
		m.start()
		if i == 0 {
			s.waitLeader(ctx, 30*time.Second)
		}
	}
	s.waitMembers(ctx, members, 30*time.Second)

	s.Fenced = netfault.FreeAddr(tb)
	fenced, err := netfault.Start(tb, netfault.ProcConfig{Name: "fenced", Binary: s.bin,
		Args: []string{"fenced", "--addr", s.Fenced, "--log-format", "console"}})
	if err != nil {
		tb.Fatal(err)
	}
	rec, err := StartRecorder()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = rec.Close() })
	s.Recorder = rec

	for i := range sidecars {
		sc := &Sidecar{Name: fmt.Sprintf("w%d", i+1), Proxy: netfault.FreeAddr(tb), Control: netfault.FreeAddr(tb),
			Health: netfault.FreeAddr(tb), Gid: gid(16 + i), tb: tb}
		sc.args = []string{"sidecar", "--cluster", strings.Join(s.Endpoints(), ","), "--worker-id", sc.Name,
			"--proxy-addr", sc.Proxy, "--control-addr", sc.Control, "--log-format", "console", "--log-level", "warn",
			"--worker-health-url", "http://" + sc.Health + "/healthz", "--worker-health-interval", ProbeInterval.String(),
			"--worker-health-timeout", ProbeTimeout.String(), "--worker-health-threshold", fmt.Sprint(ProbeThreshold),
			// The worker's health URL comes up after its sidecar: without
			// a start period a hang right after the warm-up (before a
			// first passed probe) is judged like any other.
			"--worker-health-start-period", "1ms"}
		s.Sidecars = append(s.Sidecars, sc)
		sc.start(s.bin)
	}
	for _, sc := range s.Sidecars {
		sc.waitServing(30 * time.Second)
	}
	waitHTTP(tb, "http://"+s.Fenced+"/healthz", 20*time.Second, fenced)
	return s
}

func (m *Member) start() {
	args := []string{"server", "--node-id", m.ID, "--data-dir", m.Dir, "--http-addr", m.HTTP, "--raft-addr", m.Raft,
		"--raft-election-timeout", Election.String(), "--raft-heartbeat-timeout", (Election / 3).String(),
		"--raft-leader-lease-timeout", (Election / 3).String(),
		"--leases-default-profile", profile, "--leases-grace", Grace.String(),
		"--set", "leases.profiles." + profile + ".ttl=" + TTL.String(),
		"--set", "leases.profiles." + profile + ".heartbeat=" + Heartbeat.String(),
		"--set", "leases.profiles." + profile + ".progress_timeout=" + ProgressTimeout.String(),
		"--log-format", "console", "--log-level", "warn"}
	if len(m.join) > 0 {
		args = append(args, "--join", strings.Join(m.join, ","))
	}
	name := m.ID
	if m.restarts > 0 {
		name = fmt.Sprintf("%s-r%d", m.ID, m.restarts)
	}
	p, err := netfault.Start(m.tb, netfault.ProcConfig{Name: name, Binary: m.bin, Args: args, Gid: m.Gid})
	if err != nil {
		m.tb.Fatal(err)
	}
	m.proc = p
}

// Ports are the member's listening ports.
func (m *Member) Ports() []int { return []int{port(m.HTTP), port(m.Raft)} }

// Proc is the member's current process.
func (m *Member) Proc() *netfault.Process { return m.proc }

// Restart starts the member again on its data directory (after a kill).
func (m *Member) Restart() {
	m.restarts++
	m.start()
}

func (sc *Sidecar) start(bin string) {
	p, err := netfault.Start(sc.tb, netfault.ProcConfig{Name: sc.Name, Binary: bin, Args: sc.args, Gid: sc.Gid})
	if err != nil {
		sc.tb.Fatal(err)
	}
	sc.proc = p
}

// Proc is the sidecar's current process.
func (sc *Sidecar) Proc() *netfault.Process { return sc.proc }

// Restart starts the sidecar again after a kill.
func (sc *Sidecar) Restart(bin string) {
	sc.start(bin)
	sc.waitServing(20 * time.Second)
}

func (sc *Sidecar) waitServing(limit time.Duration) {
	waitHTTP(sc.tb, "http://"+sc.Control+proxy.PathHealth, limit, sc.proc)
}

// waitHTTP polls url until it answers 200; past limit it fails with what
// the process behind it did (exited, and how, and its log's end).
func waitHTTP(tb testing.TB, url string, limit time.Duration, p *netfault.Process) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			state := "still running"
			if !p.Running() {
				state = fmt.Sprintf("exited (%v)", p.ExitErr())
			}
			tb.Fatalf("%s not serving after %v: %v; %s %s, log %s:\n%s", url, limit, err, p.Name(), state, p.LogPath(), p.Tail(20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// memberLogs is the tail of every member's log.
func (s *System) memberLogs() string {
	var b strings.Builder
	for _, m := range s.Members {
		if m.proc != nil {
			fmt.Fprintf(&b, "--- %s (%s)\n%s\n", m.ID, m.proc.LogPath(), m.proc.Tail(15))
		}
	}
	return b.String()
}

// Endpoints are the members' HTTP addresses.
func (s *System) Endpoints() []string {
	out := make([]string, len(s.Members))
	for i, m := range s.Members {
		out[i] = m.HTTP
	}
	return out
}

// Client returns a cluster client over every member (closed at the end).
func (s *System) Client() *cluster.Client {
	c, err := cluster.New(cluster.Config{Endpoints: s.Endpoints(), Timeout: 2 * time.Second})
	if err != nil {
		s.tb.Fatal(err)
	}
	s.tb.Cleanup(c.Close)
	return c
}

// memberStatus asks one member for its own view, in one attempt.
func memberStatus(ctx context.Context, c *cluster.Client, m *Member) (api.ClusterStatus, error) {
	return c.MemberStatus(ctx, m.HTTP)
}

// Leader returns the member that says it is the leader and that the other
// answering members name, or nil.
func (s *System) Leader(ctx context.Context, c *cluster.Client) *Member {
	for _, m := range s.Members {
		if m.proc == nil || !m.proc.Running() {
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		st, err := memberStatus(ctx, c, m)
		cancel()
		if err == nil && st.State == "Leader" {
			return m
		}
	}
	return nil
}

func (s *System) waitLeader(ctx context.Context, limit time.Duration) *Member {
	c := s.Client()
	deadline := time.Now().Add(limit)
	for {
		if l := s.Leader(ctx, c); l != nil {
			return l
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("no leader after %v:\n%s", limit, s.memberLogs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *System) waitMembers(ctx context.Context, n int, limit time.Duration) {
	c := s.Client()
	deadline := time.Now().Add(limit)
	for {
		st, err := c.Status(ctx)
		if err == nil && len(st.Members) == n {
			return
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("cluster has not %d members after %v: %+v %v", n, limit, st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FencedURL is fenced's write route for task.
func (s *System) FencedURL(task string) string {
	return "http://" + s.Fenced + "/v1/tasks/" + url.PathEscape(task) + "/writes"
}
