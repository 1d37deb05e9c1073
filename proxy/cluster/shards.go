package cluster

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"

	"github.com/fencepost/fencepost/fence/lease"
)

// Shard is one of several independent clusters that together serve one
// task-id space (README, "More than one cluster"): each owns the tasks
// that rendezvous hashing gives it, so a task's lease, epochs, checkpoints
// and journal live in exactly one cluster and no call spans two.
type Shard struct {
	// Name identifies the cluster in the hash; it must never change for a
	// running cluster (renaming it moves its tasks).
	Name   string
	Client *Client
}

// Shards routes task ids to clusters by rendezvous (highest random
// weight) hashing over their names: a task goes to the shard whose
// score(name, task) is highest. Adding a shard moves only the tasks it
// now wins (about 1/n of them) and removing one moves only its own; no
// task moves between the shards that stay. Safe for concurrent use (it
// never changes after NewShards).
type Shards struct {
	shards []Shard
}

// ErrShards reports an invalid shard list.
var ErrShards = errors.New("cluster: invalid shards")

// NewShards returns the router over shards: at least one, names unique
// and non-empty, every Client set.
func NewShards(shards []Shard) (*Shards, error) {
	if len(shards) == 0 {
		return nil, fmt.Errorf("%w: no shard", ErrShards)
	}
	seen := map[string]bool{}
	for i, s := range shards {
		switch {
		case s.Name == "":
			return nil, fmt.Errorf("%w: shard %d has no name", ErrShards, i)
		case seen[s.Name]:
			return nil, fmt.Errorf("%w: shard name %q given twice", ErrShards, s.Name)
		case s.Client == nil:
			return nil, fmt.Errorf("%w: shard %q has no client", ErrShards, s.Name)
		}
		seen[s.Name] = true
	}
	return &Shards{shards: append([]Shard(nil), shards...)}, nil
}

// For returns the shard that owns taskID.
func (s *Shards) For(taskID string) Shard {
	best := 0
	for i := range s.shards {
		if outranks(s.shards[i].Name, s.shards[best].Name, taskID) {
			best = i
		}
	}
	return s.shards[best]
}

// outranks reports whether the shard named a ranks above the one named b
// for task: a higher score, ties broken by the smaller name. It is the
// one comparison every route (ctl, sidecar, console) is decided by.
func outranks(a, b, task string) bool {
	sa, sb := ShardScore(a, task), ShardScore(b, task)
	return sa > sb || sa == sb && a < b
}

// Rank orders names by preference for taskID: the owner first, then the
// shard that would own the task were the owner gone, and so on. A caller
// that finds no task in its owner may look for it in the others in this
// order (the sidecar does, so a task created before a cluster was added
// stays where it is; README "More than one cluster").
func Rank(names []string, taskID string) []string {
	out := append([]string(nil), names...)
	sort.SliceStable(out, func(i, j int) bool { return outranks(out[i], out[j], taskID) })
	return out
}

// Ranked returns every shard in taskID's Rank order, the owner first.
func (s *Shards) Ranked(taskID string) []Shard {
	out := append([]Shard(nil), s.shards...)
	sort.SliceStable(out, func(i, j int) bool { return outranks(out[i].Name, out[j].Name, taskID) })
	return out
}

// Locate returns the shard that holds taskID: its owner when the owner
// has it (or cannot answer: the caller's own call then reports that),
// else the first other shard in Rank order that has it, else the owner
// (where a new task is created). A task created before a cluster was
// added thus stays where it is. A non-owner that cannot answer stops the
// search with its error: it might hold the task.
func (s *Shards) Locate(ctx context.Context, taskID string) (Shard, error) {
	ranked := s.Ranked(taskID)
	for i, sh := range ranked {
		_, err := sh.Client.Task(ctx, taskID, false)
		switch {
		case err == nil, i == 0 && !errors.Is(err, lease.ErrTaskNotFound):
			return sh, nil
		case !errors.Is(err, lease.ErrTaskNotFound):
			return Shard{}, fmt.Errorf("cluster %s, which may hold task %q, did not answer: %w", sh.Name, taskID, err)
		}
	}
	return ranked[0], nil
}

// All returns every shard, in the order given (for listing across them).
func (s *Shards) All() []Shard { return append([]Shard(nil), s.shards...) }

// ShardScore is the rendezvous weight of task on the shard named name:
// FNV-1a 64 of name, a zero byte and the task id, through the splitmix64
// finalizer (FNV's low bits alone spread short ids poorly). It is part of
// the deployment's contract: every sidecar and every ctl must compute the
// same, so it never changes (a test pins known values).
func ShardScore(name, task string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(task))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// ShardSpec is one named cluster of a shard list: its name in the hash
// and its members' endpoints.
type ShardSpec struct {
	Name      string
	Endpoints []string
}

// ParseShardSpecs reads the shard list syntax shared by ctl's --clusters
// and the sidecar's clusters key: "NAME=ADDR,ADDR;NAME=ADDR,...". Names
// must be unique; every cluster needs an endpoint. Errors wrap ErrShards
// and name the part at fault.
func ParseShardSpecs(s string) ([]ShardSpec, error) {
	var out []ShardSpec
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, eps, ok := strings.Cut(part, "=")
		name = strings.TrimSpace(name)
		var endpoints []string
		for ep := range strings.SplitSeq(eps, ",") {
			if ep = strings.TrimSpace(ep); ep != "" {
				endpoints = append(endpoints, ep)
			}
		}
		switch {
		case !ok || name == "" || len(endpoints) == 0:
			return nil, fmt.Errorf("%w: %q is not NAME=ADDR[,ADDR...]", ErrShards, part)
		case seen[name]:
			return nil, fmt.Errorf("%w: shard name %q given twice", ErrShards, name)
		}
		seen[name] = true
		out = append(out, ShardSpec{Name: name, Endpoints: endpoints})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no cluster given", ErrShards)
	}
	return out, nil
}
