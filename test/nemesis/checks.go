package nemesis

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/cluster"
)

// Tasks reads every task (with its lease history) through c.
func Tasks(ctx context.Context, c *cluster.Client, stale bool) ([]lease.Task, error) {
	var all []lease.Task
	after := ""
	for {
		list, err := c.Tasks(ctx, lease.TaskFilter{After: after, Limit: 500}, stale)
		if err != nil {
			return nil, err
		}
		for _, t := range list.Tasks {
			all = append(all, *t)
		}
		if list.Next == "" {
			return all, nil
		}
		after = list.Next
	}
}

// CheckFenced reports every write fenced accepted with an epoch lower than
// one it had accepted before for the same task (I3).
func CheckFenced(addr string) ([]string, error) {
	resp, err := http.Get("http://" + addr + "/v1/log")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Entries []struct {
			Seq   uint64 `json:"seq"`
			Task  string `json:"task"`
			Epoch uint64 `json:"epoch"`
		} `json:"entries"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	var bad []string
	newest := map[string]uint64{}
	for _, e := range body.Entries {
		if e.Epoch < newest[e.Task] {
			bad = append(bad, fmt.Sprintf("fenced accepted task %s epoch %d (entry %d) after epoch %d", e.Task, e.Epoch, e.Seq, newest[e.Task]))
		}
		newest[e.Task] = max(newest[e.Task], e.Epoch)
	}
	return bad, nil
}

// CheckEpochs reports a task whose lease history does not strictly
// increase, and an epoch granted to two workers (I2).
func CheckEpochs(tasks []lease.Task, grants []Grant) []string {
	var bad []string
	for _, t := range tasks {
		var last uint64
		for _, l := range leasesOf(t) {
			if l.Epoch <= last {
				bad = append(bad, fmt.Sprintf("task %s: epoch %d follows %d in its history", t.ID, l.Epoch, last))
			}
			last = l.Epoch
		}
	}
	holder := map[string]string{}
	for _, g := range grants {
		k := fmt.Sprintf("%s@%d", g.Task, g.Epoch)
		if h, ok := holder[k]; ok && h != g.Worker {
			bad = append(bad, fmt.Sprintf("task %s epoch %d granted to %s and %s", g.Task, g.Epoch, h, g.Worker))
		}
		holder[k] = g.Worker
	}
	return bad
}

// leasesOf is a task's leases in grant order: its history, then the
// current one.
func leasesOf(t lease.Task) []lease.Lease {
	out := append([]lease.Lease(nil), t.History()...)
	if t.Lease != nil && (len(out) == 0 || out[len(out)-1].Epoch != t.Lease.Epoch) {
		out = append(out, *t.Lease)
	}
	return out
}

// CheckCheckpoints reports an acknowledged checkpoint a member does not
// hold (I5): the member's checkpoint of the task must be at least the
// highest acknowledged seq.
func CheckCheckpoints(memberTasks map[string][]lease.Task, acks []Ack) []string {
	want := map[string]Ack{}
	for _, a := range acks {
		if a.Seq > want[a.Task].Seq {
			want[a.Task] = a
		}
	}
	var bad []string
	for member, tasks := range memberTasks {
		have := map[string]uint64{}
		for _, t := range tasks {
			if t.Checkpoint != nil {
				have[t.ID] = t.Checkpoint.Seq
			}
		}
		for task, a := range want {
			if have[task] < a.Seq {
				bad = append(bad, fmt.Sprintf("member %s: task %s checkpoint seq %d, but seq %d was acknowledged to %s at %s",
					member, task, have[task], a.Seq, a.Worker, stamp(a.At)))
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// CheckUntouchedLeases reports a lease lost by a worker no fault touched
// while it held it: one the cluster let expire, or one the worker saw
// refused (I7's "a worker no fault touched never loses its lease").
// A loss a worker saw once the run stopped its workers (stopped) is not
// counted: stopping a worker closes its attach stream, so its sidecar
// gives the lease back and cuts the write in flight (I8), as it must.
func (h *History) CheckUntouchedLeases(tasks []lease.Task, stopped time.Time) []string {
	var bad []string
	for _, t := range tasks {
		for _, l := range leasesOf(t) {
			switch l.Status {
			case lease.StatusExpired, lease.StatusReclaimed, lease.StatusSuspectDead:
			default:
				continue
			}
			if !h.wasTouched(l.WorkerID, l.AcquiredAt.Time(), l.StatusAt.Time()) {
				bad = append(bad, fmt.Sprintf("task %s epoch %d of %s, untouched by any fault, ended %s at %s (acquired %s)",
					t.ID, l.Epoch, l.WorkerID, l.Status, stamp(l.StatusAt.Time()), stamp(l.AcquiredAt.Time())))
			}
		}
	}
	h.mu.Lock()
	losses := append([]Loss(nil), h.losses...)
	h.mu.Unlock()
	for _, l := range losses {
		if !stopped.IsZero() && !l.At.Before(stopped) {
			continue
		}
		if !h.wasTouched(l.Worker, l.At.Add(-time.Second), l.At) {
			bad = append(bad, fmt.Sprintf("%s, untouched by any fault, lost %s epoch %d at %s: %s", l.Worker, l.Task, l.Epoch, stamp(l.At), l.Why))
		}
	}
	return bad
}

// Unowned lists tasks whose lease is neither active nor final: suspect,
// expired or waiting for the resume guard.
func Unowned(tasks []lease.Task) []string {
	var out []string
	for _, t := range tasks {
		if t.Lease == nil {
			continue
		}
		switch t.Lease.Status {
		case lease.StatusSuspectDead, lease.StatusExpired:
			out = append(out, fmt.Sprintf("%s epoch %d %s since %s", t.ID, t.Lease.Epoch, t.Lease.Status, stamp(t.Lease.StatusAt.Time())))
		}
	}
	return out
}

// reclaimedAt finds when lease (task, epoch) became claimable again.
func reclaimedAt(tasks map[string]lease.Task, task string, epoch uint64) (time.Time, bool) {
	t, ok := tasks[task]
	if !ok {
		return time.Time{}, false
	}
	for _, l := range leasesOf(t) {
		if l.Epoch == epoch && l.Status == lease.StatusReclaimed {
			return l.StatusAt.Time(), true
		}
	}
	return time.Time{}, false
}
