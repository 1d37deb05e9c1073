package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy"
	"github.com/fencepost/fencepost/proxy/cluster"
	"github.com/fencepost/fencepost/test/netfault"
)

// Config configures Run. The zero value plays the default scenario.
type Config struct {
	// TTL is the lease TTL. Default 2s. The heartbeat interval is TTL/4,
	// the suspect_dead grace TTL/2; a larger TTL slows the whole story.
	TTL time.Duration
	// Out receives the timeline and, last, the summary as one JSON line.
	// Nil discards them (the Summary is returned either way).
	Out io.Writer
	// Task is the task id. Default "run_456".
	Task string
	// WriteEvery is how often A tries to write while cut off. Default 100ms.
	WriteEvery time.Duration
	// Dir holds the cluster's data. Default a temporary directory that is
	// removed when Run returns.
	Dir string
	// Logger receives the components' own logs. Default none.
	Logger *zap.Logger
	// Downstream is the fenced service: DownstreamGo (default, in-process),
	// DownstreamPython or DownstreamNode (example services of fence/python
	// and fence/js, started from the checkout at Repo).
	Downstream string
	// Repo is the fencepost checkout the Python and Node downstreams run
	// from. Default ".".
	Repo string
}

// DefaultTask is the task the scenario runs when Config.Task is empty.
const DefaultTask = "run_456"

func (c Config) withDefaults() Config {
	if c.TTL == 0 {
		c.TTL = 2 * time.Second
	}
	if c.Task == "" {
		c.Task = DefaultTask
	}
	if c.WriteEvery == 0 {
		c.WriteEvery = 100 * time.Millisecond
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Downstream == "" {
		c.Downstream = DownstreamGo
	}
	if c.Repo == "" {
		c.Repo = "."
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// Validate reports a Config that cannot be played.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.TTL < 1500*time.Millisecond:
		return fmt.Errorf("scenario: TTL %v is below the minimum 1.5s (1.5 × the 300ms election timeout, with room for the margins)", c.TTL)
	case c.TTL > 5*time.Minute:
		return fmt.Errorf("scenario: TTL %v is above 5m", c.TTL)
	case c.WriteEvery < 10*time.Millisecond || c.WriteEvery > c.TTL/4:
		return fmt.Errorf("scenario: WriteEvery %v must be within [10ms, TTL/4]", c.WriteEvery)
	case c.Downstream != DownstreamGo && c.Downstream != DownstreamPython && c.Downstream != DownstreamNode:
		return fmt.Errorf("scenario: downstream %q must be %s, %s or %s", c.Downstream, DownstreamGo, DownstreamPython, DownstreamNode)
	}
	return nil
}

// Run plays the seed's failure case and returns its summary. The error is
// about the stage (a component that did not start, a step that did not
// happen in time), not about the guarantees: those are Summary.OK and
// Summary.Reasons. Run prints the summary line to cfg.Out in both cases.
func Run(ctx context.Context, cfg Config) (sum Summary, err error) {
	if err := cfg.Validate(); err != nil {
		return Summary{Reasons: []string{err.Error()}}, err
	}
	cfg = cfg.withDefaults()
	tl := NewTimeline(cfg.Out)
	p := &play{cfg: cfg, tl: tl, a: audit{}}
	sum.Task = cfg.Task
	defer func() {
		sum.ElapsedMs = tl.Elapsed().Milliseconds()
		if err != nil {
			sum.OK = false
			sum.Reasons = append(sum.Reasons, "scenario could not be played: "+err.Error())
			tl.Logf("!!", "%v", err)
		}
		tl.Raw(sum.JSON())
	}()
	// Every step below has its own deadline; this bounds the whole run.
	ctx, cancel := context.WithTimeout(ctx, 20*cfg.TTL+30*time.Second)
	defer cancel()
	defer p.teardown()
	if err = p.setup(ctx); err != nil {
		return sum, err
	}
	if err = p.play(ctx); err != nil {
		return sum, err
	}
	p.a.judge(&sum)
	sum.Epochs = []uint64{p.a.epochA, p.a.epochB}
	sum.Transitions = p.transitions
	if sum.OK {
		tl.Logf("verdict", "every guarantee held: no stale write accepted, no double execution")
	} else {
		for _, r := range sum.Reasons {
			tl.Logf("verdict", "FAILED: %s", r)
		}
	}
	return sum, nil
}

// play is one run's cast and state.
type play struct {
	cfg Config
	tl  *Timeline

	dir      string
	tempDir  bool
	cluster  *Cluster
	down     *FencedService
	aLinks   []*netfault.Link // A's sidecar → each cluster node
	stuck    *netfault.Link   // one of A's writes → downstream
	sideA    *proxy.Sidecar
	sideB    *proxy.Sidecar
	closers  []func()
	wA, wB   *Worker
	evCancel context.CancelFunc
	evDone   <-chan struct{}

	mu          sync.Mutex // guards a.sent, a.lostAt
	a           audit
	transitions []string
}

func (p *play) logf(actor, format string, args ...any) { p.tl.Logf(actor, format, args...) }

func (p *play) record(w sentWrite) {
	p.mu.Lock()
	p.a.sent = append(p.a.sent, w)
	p.mu.Unlock()
}

func (p *play) setup(ctx context.Context) error {
	cfg := p.cfg
	p.dir = cfg.Dir
	if p.dir == "" {
		d, err := os.MkdirTemp("", "fencepost-demo-")
		if err != nil {
			return err
		}
		p.dir, p.tempDir = d, true
	}
	c, err := StartCluster(ctx, ClusterConfig{Dir: p.dir, TTL: cfg.TTL, Logger: cfg.Logger})
	if err != nil {
		return err
	}
	p.cluster = c
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		return fmt.Errorf("no leader: %w", err)
	}
	p.logf("cluster", "3 nodes up on loopback, leader %s (TTL %v, heartbeat %v, grace %v)",
		leader.ID, cfg.TTL, cfg.TTL/4, cfg.TTL/2)

	if p.down, err = StartDownstream(cfg.Downstream, cfg.Repo); err != nil {
		return err
	}
	p.logf("down", "%s fenced service on %s", downstreamNames[cfg.Downstream], p.down.Addr())

	for _, ep := range c.Endpoints() {
		l, err := netfault.Listen(ep, netfault.Options{})
		if err != nil {
			return err
		}
		p.aLinks = append(p.aLinks, l)
	}
	if p.stuck, err = netfault.Listen(p.down.Addr(), netfault.Options{}); err != nil {
		return err
	}
	var aEndpoints []string
	for _, l := range p.aLinks {
		aEndpoints = append(aEndpoints, l.Addr())
	}
	if p.sideA, err = p.startSidecar(ctx, "worker-A", aEndpoints); err != nil {
		return err
	}
	if p.sideB, err = p.startSidecar(ctx, "worker-B", c.Endpoints()); err != nil {
		return err
	}
	p.wA = NewWorker("A", p.sideA.ProxyAddr(), p.sideA.ControlAddr())
	p.wB = NewWorker("B", p.sideB.ProxyAddr(), p.sideB.ControlAddr())
	p.logf("A", "sidecar up: proxy %s, reaches the cluster only through netfault links", p.sideA.ProxyAddr())
	p.logf("B", "sidecar up: proxy %s", p.sideB.ProxyAddr())

	evCtx, cancel := context.WithCancel(context.Background())
	p.evCancel = cancel
	p.evDone, err = p.wA.Events(evCtx, func(ev proxy.Event) {
		if ev.Kind == proxy.EventLost {
			p.mu.Lock()
			if p.a.lostAt.IsZero() {
				p.a.lostAt = ev.At
			}
			p.mu.Unlock()
		}
		reason := ""
		if ev.Reason != "" {
			reason = " (" + ev.Reason + ")"
		}
		p.logf("A-side", "lease event %q epoch=%d%s", ev.Kind, ev.Epoch, reason)
	})
	return err
}

func (p *play) startSidecar(ctx context.Context, worker string, endpoints []string) (*proxy.Sidecar, error) {
	cc, err := cluster.New(cluster.Config{Endpoints: endpoints, Timeout: p.cfg.TTL / 4})
	if err != nil {
		return nil, err
	}
	p.closers = append(p.closers, cc.Close)
	s, err := proxy.New(proxy.Config{
		Endpoints: endpoints, WorkerID: worker,
		ProxyAddr: "127.0.0.1:0", ControlAddr: "127.0.0.1:0",
		ClusterTimeout:   p.cfg.TTL / 2,
		SessionHeartbeat: p.cfg.TTL / 4,
		UpstreamTimeout:  30 * time.Second,
		Logger:           p.cfg.Logger.With(zap.String("sidecar", worker)),
	}, cc)
	if err != nil {
		return nil, err
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (p *play) teardown() {
	if p.evCancel != nil {
		p.evCancel()
	}
	for _, l := range p.aLinks {
		l.Restore()
	}
	if p.stuck != nil {
		p.stuck.Release()
	}
	for _, w := range []*Worker{p.wA, p.wB} {
		if w != nil {
			w.Close()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range []*proxy.Sidecar{p.sideA, p.sideB} {
		if s != nil {
			_ = s.Shutdown(ctx)
		}
	}
	if p.evDone != nil {
		<-p.evDone
	}
	for _, c := range p.closers {
		c()
	}
	for _, l := range append(p.aLinks, p.stuck) {
		if l != nil {
			_ = l.Close()
		}
	}
	if p.down != nil {
		_ = p.down.Close()
	}
	if p.cluster != nil {
		_ = p.cluster.Close()
	}
	if p.tempDir {
		_ = os.RemoveAll(p.dir)
	}
}

// writeURL is the downstream route of a task's writes on addr.
func writeURL(addr, task string) string {
	return "http://" + addr + "/v1/tasks/" + task + "/writes"
}

// leaseStatus reads the status of task's lease with the given epoch from
// the leader ("" when there is no leader or no such lease).
func (p *play) leaseStatus(ctx context.Context, epoch uint64) (lease.Status, uint64) {
	l := p.cluster.Leader()
	if l == nil || l.Store == nil {
		return "", 0
	}
	t, err := l.Store.Task(ctx, p.cfg.Task, true)
	if err != nil || t == nil {
		return "", 0
	}
	if t.Lease != nil && t.Lease.Epoch == epoch {
		return t.Lease.Status, t.MaxEpoch
	}
	for _, h := range t.History() {
		if h.Epoch == epoch {
			return h.Status, t.MaxEpoch
		}
	}
	return "", t.MaxEpoch
}

// errStep names a step that did not happen in time.
func errStep(step string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: did not happen in time", step)
	}
	return fmt.Errorf("%s: %w", step, err)
}
