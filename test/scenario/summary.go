package scenario

import (
	"encoding/json"
	"fmt"
	"time"
)

// Summary is the outcome of one run; Run prints it as the last line, one
// JSON object.
type Summary struct {
	// Task is the task the scenario ran.
	Task string `json:"task"`
	// Epochs are the fencing tokens granted, in order: A's, then B's.
	Epochs []uint64 `json:"epochs"`
	// Transitions are the statuses of A's lease the cluster was seen in.
	Transitions []string `json:"lease_transitions"`
	// WritesAccepted is the number of writes the downstream accepted.
	WritesAccepted int `json:"writes_accepted"`
	// BlockedBySidecar is the number of A's writes its sidecar refused
	// (they never left).
	BlockedBySidecar int `json:"blocked_by_sidecar"`
	// CutInFlight is the number of A's forwarded writes its sidecar cut
	// when the lease was lost (the held write, when the sidecar cuts it).
	CutInFlight int `json:"cut_in_flight"`
	// RejectedStaleDownstream is the number of writes the downstream
	// rejected for a stale fencing token.
	RejectedStaleDownstream int `json:"rejected_stale_downstream"`
	// AcceptedStale counts accepted writes whose epoch was lower than one
	// the downstream had already accepted for the task (I3; must be 0).
	AcceptedStale int `json:"accepted_stale"`
	// DoubleExecution counts accepted writes of the old epoch after the new
	// owner's first accepted write, plus accepted writes A sent after its
	// sidecar's deadline or after the cluster expired its lease (must be 0).
	DoubleExecution int `json:"double_execution"`
	// ResumedFromCheckpoint is true when B started from A's checkpoint.
	ResumedFromCheckpoint bool `json:"resumed_from_checkpoint"`
	// RetryReplayed is true when B's retry of its step-2 write (the same
	// Idempotency-Key) was answered by the downstream's idempotency
	// replay without being run again.
	RetryReplayed bool `json:"retry_replayed"`
	// ElapsedMs is how long the run took.
	ElapsedMs int64 `json:"elapsed_ms"`
	// OK is true only when every guarantee held.
	OK bool `json:"ok"`
	// Reasons names each guarantee that did not hold.
	Reasons []string `json:"reasons,omitempty"`
}

// JSON renders s as one line.
func (s Summary) JSON() string {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Sprintf(`{"ok":false,"reasons":[%q]}`, err.Error())
	}
	return string(b)
}

// sentWrite is one write a worker made and what became of it.
type sentWrite struct {
	Worker string
	Epoch  uint64 // the epoch the worker believed it held
	Action string
	Result WriteResult
}

// audit holds what the run observed, for judge.
type audit struct {
	epochA, epochB uint64
	resumed        bool
	retryReplayed  bool
	accepted       []AcceptedWrite // downstream log, in order
	rejectedStale  int             // downstream count
	sent           []sentWrite
	lostAt         time.Time // A's sidecar said "lost" (zero: never)
	expiredAt      time.Time // the cluster was first seen past active→expired
	// latestDeadline bounds A's sidecar deadline from above without asking
	// the sidecar: the last renewal A heard of was sent before its link to
	// the cluster was cut, and no validity exceeds the TTL.
	latestDeadline time.Time
}

// cutoff is the instant after which no write of A may be forwarded: the
// earliest of A's sidecar reporting the lease lost, the cluster expiring
// it, and the latest possible local deadline. Zero when none is known.
func (a audit) cutoff() time.Time {
	var c time.Time
	for _, t := range []time.Time{a.lostAt, a.expiredAt, a.latestDeadline} {
		if !t.IsZero() && (c.IsZero() || t.Before(c)) {
			c = t
		}
	}
	return c
}

// judge fills the counters and the verdict of s from a.
func (a audit) judge(s *Summary) {
	s.WritesAccepted = len(a.accepted)
	s.RejectedStaleDownstream = a.rejectedStale

	// I3 and the old epoch after the new owner's first write, from the
	// downstream's own log order.
	var maxSeen uint64
	sawB := false
	for _, w := range a.accepted {
		if w.Epoch < maxSeen {
			s.AcceptedStale++
		}
		maxSeen = max(maxSeen, w.Epoch)
		if a.epochB != 0 && w.Epoch == a.epochB {
			sawB = true
		}
		if sawB && w.Epoch < a.epochB {
			s.DoubleExecution++
		}
	}
	// A's writes sent after its sidecar's deadline or after the cluster
	// expired the lease must never be accepted.
	cutoff := a.cutoff()
	for _, w := range a.sent {
		switch w.Result.Outcome {
		case BlockedBySidecar:
			if w.Worker == "A" {
				s.BlockedBySidecar++
			}
		case CutInFlight:
			s.CutInFlight++
		case Accepted:
			if w.Worker == "A" && !cutoff.IsZero() && !w.Result.Sent.Before(cutoff) {
				s.DoubleExecution++
			}
		}
	}
	s.ResumedFromCheckpoint = a.resumed
	s.RetryReplayed = a.retryReplayed

	var why []string
	if s.AcceptedStale != 0 {
		why = append(why, fmt.Sprintf("the downstream accepted %d write(s) with an epoch lower than one it had accepted (I3)", s.AcceptedStale))
	}
	if s.DoubleExecution != 0 {
		why = append(why, fmt.Sprintf("%d write(s) of the old owner were accepted after it lost the lease (double execution)", s.DoubleExecution))
	}
	if s.BlockedBySidecar == 0 {
		why = append(why, "A's sidecar blocked none of A's writes after its deadline (I4)")
	}
	if s.RejectedStaleDownstream == 0 {
		why = append(why, "the downstream rejected no stale write: the held write was not fenced (I3)")
	}
	if a.epochB <= a.epochA {
		why = append(why, fmt.Sprintf("B's epoch %d is not higher than A's %d (I2)", a.epochB, a.epochA))
	}
	if !a.resumed {
		why = append(why, "B did not resume from A's checkpoint")
	}
	if !a.retryReplayed {
		why = append(why, "B's retry of step-2 (same Idempotency-Key) was not replayed by the downstream")
	}
	s.Reasons = why
	s.OK = len(why) == 0
}
