package raftstore

import (
	"time"

	"go.uber.org/zap"
)

// drainTimeout bounds how long drainProposals waits.
const drainTimeout = 5 * time.Second

// proposable says whether a proposal may be handed to raft now. It is
// called with proposeGate held for reading, so once drainProposals has
// taken the gate no proposal is between this check and raft.
func (s *Store) proposable() error {
	select {
	case <-s.closing:
		return ErrShutdown
	default:
	}
	if h := s.fsm.halt.halted(); h != nil {
		return h
	}
	return nil
}

// drainProposals lets every proposal already handed to raft reach its
// answer before raft shuts down, on Close and after a halt.
// hashicorp/raft (v1.7) drops, unanswered, the futures of entries that
// were committed but still queued for the FSM (its buffered fsmMutateCh)
// when it shuts down, and ApplyLog's timeout bounds only the enqueue: a
// proposer racing the shutdown would wait on its future forever, and the
// API request with it (seen in CI: TestLinearizableLeasesAcrossLeaderKill
// hung 11 minutes with three clients in applyEntry on the closed leader).
//
// Taking proposeGate stops new proposals (proposable sees the close or
// the halt); then the ones raft holds are waited for while it still runs.
// Each ends: a committed entry is answered as the FSM applies it (a
// halted FSM answers at once), an uncommitted one when it commits or when
// its leader steps down, which a leader cut off from its quorum does
// within its lease timeout. The wait is bounded all the same, so a close
// is never held up for long by a member that cannot make progress.
func (s *Store) drainProposals() {
	s.proposeGate.Lock()
	//lint:ignore SA2001 taking the lock is the point: once held, no proposal is between proposable and raft
	s.proposeGate.Unlock()
	deadline := time.Now().Add(drainTimeout)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for s.awaiting.Load() > 0 {
		if time.Now().After(deadline) {
			s.log.Warn("proposals unanswered at raft shutdown", zap.Int64("proposals", s.awaiting.Load()))
			return
		}
		<-tick.C
	}
}
