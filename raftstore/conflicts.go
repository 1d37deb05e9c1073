package raftstore

import (
	"errors"

	"github.com/fencepost/fencepost/fence/lease"
	"go.uber.org/zap"
)

// Alarm kinds of fencepost_cluster_double_execution_alarms_total. Each is a
// sign that two workers are acting for one task; nothing else is counted
// there, so the alert on it can page (DESIGN.md 9). The third sign, a stale
// write that reached a downstream, is counted by the downstream itself
// (fencepost_refsvc_writes_stale_rejected_total).
const (
	// alarmHeartbeatForeign: a sidecar heartbeats for a lease another
	// session (or a newer epoch) holds; it believes it owns the task.
	alarmHeartbeatForeign = "heartbeat_foreign_lease"
	// alarmSupersededOwner: a checkpoint, wait, release or journal intent
	// under an epoch older than the lease another session now holds: the
	// old owner is still working after a newer one was let in.
	alarmSupersededOwner = "superseded_owner_acted"
)

// alarmKinds are exported from 0 at start, so the first alarm is an
// increase an alert rule can see.
var alarmKinds = []string{alarmHeartbeatForeign, alarmSupersededOwner}

// holderOps act for a task under the caller's lease: from a superseded
// owner each is work done by a second worker.
var holderOps = map[lease.Op]bool{
	lease.OpCheckpoint: true, lease.OpWait: true, lease.OpRelease: true, lease.OpIntent: true,
}

// observeConflict counts, once per applied command (a replayed request id
// is not counted again), the grants refused because the task is held and
// the commands of superseded owners. A refused acquire is a hot standby
// waiting its turn, not a double execution: it has its own counter,
// fencepost_cluster_acquire_contended_total.
func (s *Store) observeConflict(cmd *lease.Command, res lease.Result, err error) {
	if err == nil || res.Duplicate {
		return
	}
	var cur *lease.Lease
	if res.Task != nil {
		cur = res.Task.Lease
	}
	switch {
	case (cmd.Op == lease.OpAcquire || cmd.Op == lease.OpClaim) && errors.Is(err, lease.ErrLeaseHeld):
		// The session's own suspect lease is not contention.
		if cur == nil || cur.SessionID != cmd.SessionID {
			s.m.acquireContended.Inc()
		}
	case holderOps[cmd.Op] && errors.Is(err, lease.ErrStaleEpoch):
		if cur == nil || cmd.Epoch == 0 || cmd.Epoch >= cur.Epoch || cur.SessionID == cmd.SessionID {
			// An epoch never granted, or this session's own earlier
			// lease: one worker confused, not two acting.
			return
		}
		s.m.alarms.WithLabelValues(alarmSupersededOwner).Inc()
		s.log.Warn("a superseded owner acted for a task a newer lease holds", zap.String("task", cmd.TaskID),
			zap.Stringer("op", cmd.Op), zap.Uint64("epoch", cmd.Epoch), zap.Uint64("currentEpoch", cur.Epoch),
			zap.String("session", cmd.SessionID), zap.String("holderSession", cur.SessionID))
	}
}
