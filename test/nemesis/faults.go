package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fencepost/fencepost/proxy/cluster"
)

// Kind is a kind of fault.
type Kind string

// The fault kinds. Member faults never touch a worker: no lease may be
// lost to them. Sidecar faults touch the one worker they are aimed at.
const (
	LeaderKill         Kind = "leader-kill"          // SIGKILL the leader, restart it
	LeaderPause        Kind = "leader-pause"         // SIGSTOP the leader longer than the election timeout
	LeaderPauseLong    Kind = "leader-pause-long"    // SIGSTOP the leader longer than the TTL
	FollowerKill       Kind = "follower-kill"        // SIGKILL a follower, restart it
	LeaderIsolate      Kind = "leader-isolate"       // cut the leader from its peers; sidecars still reach it
	MemberPartition    Kind = "member-partition"     // cut one member from everyone
	SidecarPause       Kind = "sidecar-pause"        // SIGSTOP a sidecar past TTL + grace
	SidecarWorkerPause Kind = "sidecar-worker-pause" // stop a worker and SIGSTOP its sidecar
	SidecarKill        Kind = "sidecar-kill"         // SIGKILL a sidecar, restart it
	SidecarPartition   Kind = "sidecar-partition"    // cut a sidecar from the cluster
)

// Kinds lists every fault kind.
var Kinds = []Kind{LeaderKill, LeaderPause, LeaderPauseLong, FollowerKill, LeaderIsolate, MemberPartition,
	SidecarPause, SidecarWorkerPause, SidecarKill, SidecarPartition, WorkerKill, WorkerHang, WorkerStall}

// needsFirewall reports whether a kind is a network partition.
func (k Kind) needsFirewall() bool {
	return k == LeaderIsolate || k == MemberPartition || k == SidecarPartition
}

// onSidecar reports whether a kind is aimed at a worker's sidecar.
func (k Kind) onSidecar() bool {
	return k == SidecarPause || k == SidecarWorkerPause || k == SidecarKill || k == SidecarPartition
}

// duration draws how long a fault of kind k lasts.
func (k Kind) duration(rng *rand.Rand) time.Duration {
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	switch k {
	case LeaderPause:
		return between(3*Election, TTL-500*time.Millisecond)
	case LeaderPauseLong, LeaderIsolate:
		return between(TTL+time.Second, TTL+3*time.Second)
	case SidecarPause, SidecarWorkerPause:
		// Long enough for the task to be reclaimed and taken by another
		// worker, so a sidecar that forgot its deadline would be caught.
		return between(ReclaimBound+2*time.Second, ReclaimBound+3*time.Second)
	case SidecarPartition:
		// Past the probe (probeDelay), and long enough for the cut-off
		// worker's task to be reclaimed before the heal.
		return between(ReclaimBound+time.Second, ReclaimBound+2*time.Second)
	case MemberPartition:
		return between(2*time.Second, 2*TTL)
	case WorkerKill, WorkerHang, WorkerStall:
		// Past the bound, so a sidecar that ignored the worker's state
		// would be caught still holding its lease.
		b, _ := k.workerBound()
		return between(b+time.Second, b+2*time.Second)
	default: // kills: time until the restart
		return between(500*time.Millisecond, 2*time.Second)
	}
}

// Step is one planned fault.
type Step struct {
	Kind Kind
	For  time.Duration // how long the fault lasts
	Gap  time.Duration // quiet time after the heal
	Pick int           // chooses the target among the candidates
}

// Plan draws n faults from seed, cycling through kinds in a shuffled order
// so every kind appears once per len(kinds) faults.
func Plan(seed uint64, n int, kinds []Kind) []Step {
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65))
	var out []Step
	var order []Kind
	for len(out) < n {
		if len(order) == 0 {
			order = append([]Kind(nil), kinds...)
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		k := order[0]
		order = order[1:]
		out = append(out, Step{Kind: k, For: k.duration(rng),
			Gap: 700*time.Millisecond + time.Duration(rng.IntN(1300))*time.Millisecond, Pick: rng.IntN(1 << 20)})
	}
	return out
}

// Fault is one fault as it ran, with what was measured.
type Fault struct {
	Step
	Target string
	Start  time.Time
	Heal   time.Time
	// Election is how long after the start a member other than the target
	// was leader (leader faults; 0 when leadership never moved).
	Election time.Duration
	// Task and Epoch are the lease the target worker held at the start
	// (sidecar faults), for measuring its reclaim.
	Task  string
	Epoch uint64
	// Reclaim is how long after the start (or after a leader change that
	// came later, which restarts every TTL) that lease was claimable again.
	Reclaim time.Duration
	// Stall is the longest time during the fault (and 2 s after) that
	// workers attempted checkpoints and none succeeded.
	Stall time.Duration
}

func (f *Fault) String() string {
	return fmt.Sprintf("%s on %s for %v", f.Kind, f.Target, f.For.Round(time.Millisecond))
}

// watchElection polls the members until one other than old is leader and
// reports how long after start that was (0 if ctx ended first).
func watchElection(ctx context.Context, sys *System, c *cluster.Client, old *Member, start time.Time) <-chan time.Duration {
	out := make(chan time.Duration, 1)
	go func() {
		defer close(out)
		for ctx.Err() == nil {
			if l := sys.Leader(ctx, c); l != nil && l != old {
				out <- time.Since(start)
				return
			}
			pause(ctx, 50*time.Millisecond)
		}
	}()
	return out
}
