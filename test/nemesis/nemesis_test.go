package nemesis

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencepost/fencepost/test/netfault"
)

func TestMain(m *testing.M) {
	code := m.Run()
	netfault.RemoveBinary()
	os.Exit(code)
}

// envInt reads a positive integer setting, or def.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s: want a positive integer, got %q", name, v)
	}
	return n
}

// enabled skips unless the suite was asked for: it runs real processes
// for minutes, so `go test ./...` leaves it to test/nemesis.sh.
func enabled(t *testing.T) {
	if os.Getenv("NEMESIS") == "" {
		t.Skip("the nemesis suite runs real processes for minutes; run it with test/nemesis.sh (NEMESIS=1)")
	}
	netfault.Binary(t) // build before anything is timed
}

// kinds returns the fault kinds this run may use: NEMESIS_KINDS
// (comma-separated) or all, without partitions when the firewall cannot
// run here.
func kinds(t *testing.T) ([]Kind, bool) {
	var ks []Kind
	if v := os.Getenv("NEMESIS_KINDS"); v != "" {
		known := map[Kind]bool{}
		for _, k := range Kinds {
			known[k] = true
		}
		for _, s := range strings.Split(v, ",") {
			k := Kind(strings.TrimSpace(s))
			if !known[k] {
				t.Fatalf("NEMESIS_KINDS: unknown kind %q (known: %v)", k, Kinds)
			}
			ks = append(ks, k)
		}
	} else {
		ks = Kinds
	}
	why := FirewallAvailable()
	if why == "" {
		return ks, true
	}
	var out []Kind
	for _, k := range ks {
		if k.needsFirewall() {
			t.Logf("skipping %s faults: %s", k, why)
			continue
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		t.Skip(why)
	}
	return out, false
}

// report fails the test with the problems, the seed and the history, and
// logs the recovery table either way; with files, it also writes them
// where NEMESIS_REPORT and NEMESIS_HISTORY say.
func report(t *testing.T, r *Run, seed uint64, bad []string, files bool) {
	t.Logf("seed %d; recovery by fault:\n%s", seed, r.Table())
	if p := os.Getenv("NEMESIS_REPORT"); p != "" && files {
		if err := os.WriteFile(p, []byte(r.Table()), 0o644); err != nil {
			t.Errorf("writing the report: %v", err)
		}
	}
	if p := os.Getenv("NEMESIS_HISTORY"); p != "" && files {
		if err := os.WriteFile(p, []byte(r.H.String()), 0o644); err != nil {
			t.Errorf("writing the history: %v", err)
		}
	}
	if len(bad) > 0 {
		// The history comes first and the problems last: CI keeps only the
		// tail of a failed run, and the problems are what it must show.
		t.Logf("history:\n%s", r.H)
		t.Errorf("seed %d (rerun: NEMESIS_SEED=%d test/nemesis.sh): %d problems:\n%s",
			seed, seed, len(bad), strings.Join(bad, "\n"))
	}
}

// TestNemesis runs a seeded schedule of faults against 3 members and
// several sidecar+worker pairs contending for tasks, then checks safety
// (I2-I5, the raw recorder) and liveness (I7): every task owned again
// within the bound after the last heal, and no lease lost by a worker no
// fault touched. NEMESIS_FAULTS, _OPS, _WORKERS, _SEED and _KINDS
// size the run.
func TestNemesis(t *testing.T) {
	enabled(t)
	ks, fw := kinds(t)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("NEMESIS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("NEMESIS_SEED: %v", err)
		}
		seed = s
	}
	faults := envInt(t, "NEMESIS_FAULTS", 25)
	minOps := envInt(t, "NEMESIS_OPS", 20000)
	workers := envInt(t, "NEMESIS_WORKERS", 5)
	plan := Plan(seed, faults, ks)
	t.Logf("seed %d: %d faults of %d kinds, >= %d operations, %d workers", seed, len(plan), len(ks), minOps, workers)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	r := NewRun(ctx, t, 3, workers, seed, fw)
	r.warmUp(ctx)
	for i, st := range plan {
		f := r.Inject(ctx, st)
		t.Logf("fault %d/%d: %s, ops so far %d", i+1, len(plan), f, r.H.Ops())
	}
	deadline := time.Now().Add(2 * time.Minute)
	for r.H.Ops() < minOps && time.Now().Before(deadline) {
		pause(ctx, 200*time.Millisecond)
	}
	bad := r.Finish(ctx)
	if ops := r.H.Ops(); ops < minOps {
		bad = append(bad, fmt.Sprintf("only %d operations (want >= %d): the run did not test enough", ops, minOps))
	}
	report(t, r, seed, bad, true)
}

// warmUp waits until every worker has held a task, so the faults meet a
// busy system.
func (r *Run) warmUp(ctx context.Context) {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		seen := map[string]bool{}
		r.H.mu.Lock()
		for _, g := range r.H.grants {
			seen[g.Worker] = true
		}
		r.H.mu.Unlock()
		if len(seen) == len(r.Workers) {
			return
		}
		pause(ctx, 100*time.Millisecond)
	}
	r.tb.Fatalf("not every worker got a task within 60s:\n%s", r.H)
}

// onDemand runs one fault kind on the leader, twice, with every worker
// healthy, and checks that no worker lost its lease.
func onDemand(t *testing.T, k Kind, d time.Duration) {
	enabled(t)
	fw := FirewallAvailable() == ""
	if k.needsFirewall() && !fw {
		t.Skip(FirewallAvailable())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := NewRun(ctx, t, 3, 4, 1, fw)
	r.warmUp(ctx)
	for range 2 {
		f := r.Inject(ctx, Step{Kind: k, For: d, Gap: 2 * time.Second})
		t.Logf("%s: new leader after %v, checkpoints stalled %v", f, f.Election.Round(time.Millisecond), f.Stall.Round(time.Millisecond))
	}
	report(t, r, 1, r.Finish(ctx), false)
}

// TestLeaderIsolatedFromPeersKeepsEveryLease cuts the leader off from its
// peers for twice the TTL while the sidecars can still reach it: the
// sidecars must find the new leader through the other members before
// their local deadlines.
func TestLeaderIsolatedFromPeersKeepsEveryLease(t *testing.T) {
	onDemand(t, LeaderIsolate, 2*TTL)
}

// TestLeaderPausedPastTTLKeepsEveryLease SIGSTOPs the leader for twice the
// TTL: heartbeats to it time out within a share of the interval and move
// on.
func TestLeaderPausedPastTTLKeepsEveryLease(t *testing.T) {
	onDemand(t, LeaderPauseLong, 2*TTL)
}
