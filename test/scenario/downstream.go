package scenario

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencepost/fencepost/fence/refsvc"
)

// refsvc's counters of writes rejected for a stale token, and of every
// rejection by reason.
const (
	staleMetric    = "fencepost_refsvc_writes_stale_rejected_total"
	rejectedMetric = "fencepost_refsvc_writes_rejected_total"
)

// FencedService is the downstream the workers write to: the reference
// fenced service (fence/refsvc) on 127.0.0.1:0 with its own metrics
// registry, seen through the two things the scenario and the fault tests
// judge by — its append-only log of accepted writes and its count of
// writes refused as stale.
type FencedService struct {
	srv *refsvc.Server
	reg *prometheus.Registry
	ext *external // set for the Python and Node downstreams instead of srv
}

// StartDownstream starts the downstream of the given kind (DownstreamGo,
// or "" for it; DownstreamPython and DownstreamNode from the checkout at
// repo).
func StartDownstream(kind, repo string) (*FencedService, error) {
	if kind == "" || kind == DownstreamGo {
		return StartFencedService()
	}
	ext, err := startExternal(kind, repo)
	if err != nil {
		return nil, err
	}
	return &FencedService{ext: ext}, nil
}

// AcceptedWrite is one write the downstream accepted.
type AcceptedWrite = refsvc.Entry

// StartFencedService starts a FencedService on 127.0.0.1:0.
func StartFencedService() (*FencedService, error) {
	reg := prometheus.NewRegistry()
	srv, err := refsvc.New(refsvc.Config{Addr: "127.0.0.1:0", Registerer: reg})
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, err
	}
	return &FencedService{srv: srv, reg: reg}, nil
}

// Addr is the service's host:port.
func (d *FencedService) Addr() string {
	if d.ext != nil {
		return d.ext.addr
	}
	return d.srv.Addr()
}

// WriteURL is the URL of task's writes.
func (d *FencedService) WriteURL(task string) string { return writeURL(d.Addr(), task) }

// Accepted returns the accepted writes of task, in the order they were
// appended to the log (the order they took effect).
func (d *FencedService) Accepted(task string) []AcceptedWrite {
	var out []AcceptedWrite
	var all []AcceptedWrite
	if d.ext != nil {
		all = d.ext.log()
	} else {
		all = d.srv.Log()
	}
	for _, e := range all {
		if e.Task == task {
			out = append(out, e)
		}
	}
	return out
}

// CheckLog verifies I3 over the whole log (refsvc.Server.CheckLog).
func (d *FencedService) CheckLog() error {
	if d.ext != nil {
		return d.ext.checkLog()
	}
	return d.srv.CheckLog()
}

// RejectedStale is how many writes the service refused as stale. The
// service counts without task labels, so this is over all tasks: give
// each test its own service.
func (d *FencedService) RejectedStale() int {
	if d.ext != nil {
		_, n := d.ext.stats()
		return n
	}
	return d.counter(staleMetric)
}

// Rejected is how many writes the service refused for any reason (over
// all tasks).
func (d *FencedService) Rejected() int {
	if d.ext != nil {
		n, _ := d.ext.stats()
		return n
	}
	return d.counter(rejectedMetric)
}

// counter sums the series of one counter family.
func (d *FencedService) counter(name string) int {
	mfs, err := d.reg.Gather()
	if err != nil {
		return 0
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return int(n)
}

// Close stops the service.
func (d *FencedService) Close() error {
	if d.ext != nil {
		return d.ext.close()
	}
	return d.srv.Close()
}
