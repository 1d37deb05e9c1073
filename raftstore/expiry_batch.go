package raftstore

import (
	"context"
	"fmt"

	"github.com/fencepost/fencepost/fence/lease"
)

// entryBatch carries many of the leader's own transitions (batchable) in
// one raft entry: a JSON array of lease.Commands, applied in order at the
// entry's index. One entry per expiryBatchSize leases is what lets a dead
// session's 100,000 leases be suspected, then expired, then reclaimed
// within one tick each (DESIGN.md, expiry), where one entry per lease ran
// at raft's pace (~150 leases/s in the probe). Not ignorable: a member
// that does not know it must stop rather than skip transitions the others
// applied.
const entryBatch entryType = 5

// expiryBatchSize is the most commands one batch entry holds: ~120 bytes
// of JSON each, so an entry stays near 128 KiB, well inside raft's
// AppendEntries, while DefaultProposalsPerTick batches cover 262,144
// leases per tick.
const expiryBatchSize = 1024

// batchable lists the ops a batch may carry: the leader's transitions,
// none of which grants a lease (a grant takes the entry's index as its
// epoch, and one index may not be two grants' epoch for one task).
var batchable = map[lease.Op]bool{
	lease.OpSuspect: true, lease.OpExpire: true, lease.OpReclaim: true,
	lease.OpSignal: true, lease.OpCloseSession: true,
}

// applyBatch applies a batch entry's commands in order under one lock and
// returns their results ([]lease.Result, in the same order). A command of
// an op a batch may not carry is refused alone (ErrInvalid), identically
// on every replica.
func applyBatch(f *fsm, index uint64, body []byte) (any, error) {
	var cmds []lease.Command
	if err := decodeBody(body, &cmds); err != nil {
		return nil, err
	}
	out := make([]lease.Result, len(cmds))
	f.mu.Lock()
	for i := range cmds {
		if !batchable[cmds[i].Op] {
			out[i] = lease.Result{Err: fmt.Errorf("%w: %s cannot be batched", lease.ErrInvalid, cmds[i].Op)}
			continue
		}
		out[i] = f.model.Apply(index, &cmds[i])
	}
	f.mu.Unlock()
	for i := range cmds {
		f.watch.observe(&cmds[i], out[i])
	}
	return out, nil
}

// batches splits cmds into runs of at most size.
func batches(cmds []lease.Command, size int) [][]lease.Command {
	var out [][]lease.Command
	for len(cmds) > 0 {
		n := min(size, len(cmds))
		out = append(out, cmds[:n:n])
		cmds = cmds[n:]
	}
	return out
}

// proposeRun commits run as one batch entry, or, for a run of one while
// older members may read it (Config.MixedVersions), as a plain command.
func (s *Store) proposeRun(ctx context.Context, run []lease.Command) ([]lease.Result, error) {
	if len(run) == 1 && s.cfg.MixedVersions {
		res, err := s.propose(ctx, &run[0])
		return []lease.Result{res}, err
	}
	return s.proposeBatch(ctx, run)
}

// proposeBatch commits cmds (all batchable) as one entry and returns each
// one's result. Times are stamped as propose does.
func (s *Store) proposeBatch(ctx context.Context, cmds []lease.Command) ([]lease.Result, error) {
	now := s.clock.Now()
	for i := range cmds {
		if cmds[i].Time.IsZero() {
			cmds[i].Time = now
		}
	}
	resp, err := s.applyEntry(ctx, entryBatch, cmds)
	if err != nil {
		return nil, err
	}
	res, ok := resp.([]lease.Result)
	if !ok || len(res) != len(cmds) {
		return nil, fmt.Errorf("raftstore: unexpected batch apply response %T", resp)
	}
	if s.m != nil {
		for i := range res {
			if res[i].Err != nil {
				s.m.applyErrors.WithLabelValues(cmds[i].Op.String(), lease.ErrorCode(res[i].Err)).Inc()
			}
		}
	}
	return res, nil
}
