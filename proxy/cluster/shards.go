package cluster

import (
	"errors"
	"fmt"
	"hash/fnv"
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
	best, bestScore := 0, uint64(0)
	for i, sh := range s.shards {
		if sc := ShardScore(sh.Name, taskID); i == 0 || sc > bestScore || sc == bestScore && sh.Name < s.shards[best].Name {
			best, bestScore = i, sc
		}
	}
	return s.shards[best]
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
