package nemesis

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/cluster"
)

// Finish waits until every task is owned again after the last heal (or
// fails after ReclaimBound), stops the workers and runs every end check.
// It returns the problems found; none means the run passed.
func (r *Run) Finish(ctx context.Context) []string {
	bad := r.exited()
	healed := r.LastHeal
	if healed.IsZero() {
		healed = time.Now()
	}
	var unowned []string
	for {
		tasks, err := Tasks(ctx, r.c, false)
		if err == nil {
			if unowned = Unowned(tasks); len(unowned) == 0 {
				r.H.Logf("check", "every task owned or claimable %v after the last heal", time.Since(healed).Round(time.Millisecond))
				break
			}
		}
		if time.Since(healed) > ReclaimBound {
			bad = append(bad, fmt.Sprintf("%v after the last heal (bound %v), tasks still not owned: %s (read error: %v)",
				time.Since(healed).Round(time.Millisecond), ReclaimBound, strings.Join(unowned, "; "), err))
			break
		}
		pause(ctx, 100*time.Millisecond)
	}
	r.Stop()

	tasks, err := Tasks(ctx, r.c, false)
	if err != nil {
		return append(bad, fmt.Sprintf("reading the tasks: %v", err))
	}
	byID := map[string]lease.Task{}
	for _, t := range tasks {
		byID[t.ID] = t
	}
	for _, f := range r.Faults {
		if f.Task == "" {
			continue
		}
		var chain []string
		for _, l := range leasesOf(byID[f.Task]) {
			chain = append(chain, fmt.Sprintf("%d:%s@%s", l.Epoch, l.Status, stamp(l.StatusAt.Time())))
		}
		r.H.Logf("check", "%s: task %s state %s, leases %s", f, f.Task, byID[f.Task].State, strings.Join(chain, " "))
		if f.Kind.onWorker() {
			bad = append(bad, r.checkWorkerFault(f, byID)...)
			continue
		}
		if at, ok := reclaimedAt(byID, f.Task, f.Epoch); ok {
			// A leader elected after the owner died gives every lease a
			// new TTL (DESIGN.md 4): the bound counts from the later.
			from := f.Start
			if lc := r.lastLeaderChange(at); lc.After(from) {
				from = lc
				r.H.Logf("check", "%s: a new leader at %s restarted the TTL", f, stamp(lc))
			}
			f.Reclaim = at.Sub(from)
			if f.Reclaim > ReclaimBound {
				bad = append(bad, fmt.Sprintf("%s: %s epoch %d claimable again %v after the fault or the last leader change (bound %v)",
					f, f.Task, f.Epoch, f.Reclaim.Round(time.Millisecond), ReclaimBound))
			}
		}
	}
	if b, err := CheckFenced(r.Sys.Fenced); err != nil {
		bad = append(bad, fmt.Sprintf("reading fenced's log: %v", err))
	} else {
		bad = append(bad, b...)
	}
	rec := r.Sys.Recorder.Log()
	bad = append(bad, CheckRecorder(rec)...)
	bad = append(bad, CheckLateWrites(rec, byID)...)
	bad = append(bad, r.late...)
	r.H.mu.Lock()
	grants := append([]Grant(nil), r.H.grants...)
	acks := append([]Ack(nil), r.H.acks...)
	r.H.mu.Unlock()
	bad = append(bad, CheckEpochs(tasks, grants)...)
	bad = append(bad, r.H.CheckUntouchedLeases(tasks, r.stoppedAt)...)
	bad = append(bad, r.H.CheckWorkerReasons(tasks, r.stoppedAt)...)
	bad = append(bad, r.checkMembers(ctx, acks)...)
	r.H.Logf("check", "%d operations, %d grants, %d checkpoints acknowledged, %d raw writes, %d tasks",
		r.H.Ops(), len(grants), len(acks), len(rec), len(tasks))
	return bad
}

// checkMembers reads every member's own replica until it holds every
// acknowledged checkpoint (followers may lag a moment), up to 20 s.
func (r *Run) checkMembers(ctx context.Context, acks []Ack) []string {
	deadline := time.Now().Add(20 * time.Second)
	for {
		per := map[string][]lease.Task{}
		var readErr []string
		for _, m := range r.Sys.Members {
			c, err := cluster.New(cluster.Config{Endpoints: []string{m.HTTP}, Timeout: 2 * time.Second})
			if err != nil {
				return []string{err.Error()}
			}
			tasks, err := Tasks(ctx, c, true)
			c.Close()
			if err != nil {
				readErr = append(readErr, fmt.Sprintf("member %s: %v", m.ID, err))
				continue
			}
			per[m.ID] = tasks
		}
		bad := append(readErr, CheckCheckpoints(per, acks)...)
		if len(bad) == 0 || time.Now().After(deadline) {
			return bad
		}
		pause(ctx, 200*time.Millisecond)
	}
}

// Table is the measured recovery, by fault kind, as a markdown table.
func (r *Run) Table() string {
	type agg struct {
		n                        int
		election, stall, reclaim time.Duration
		elections, reclaims      int
	}
	by := map[Kind]*agg{}
	for _, f := range r.Faults {
		a := by[f.Kind]
		if a == nil {
			a = &agg{}
			by[f.Kind] = a
		}
		a.n++
		a.stall = max(a.stall, f.Stall)
		if f.Election > 0 {
			a.elections++
			a.election = max(a.election, f.Election)
		}
		if f.Reclaim > 0 {
			a.reclaims++
			a.reclaim = max(a.reclaim, f.Reclaim)
		}
	}
	kinds := make([]Kind, 0, len(by))
	for k := range by {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i] < kinds[j] })
	ms := func(d time.Duration, n int) string {
		if n == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	var b strings.Builder
	b.WriteString("| fault | runs | new leader after (max) | checkpoints stalled (max) | task claimable again after (max) |\n|---|---|---|---|---|\n")
	for _, k := range kinds {
		a := by[k]
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", k, a.n, ms(a.election, a.elections), ms(a.stall, a.n), ms(a.reclaim, a.reclaims))
	}
	return b.String()
}
