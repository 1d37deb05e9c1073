package lease

// Lease-end reasons that say how the worker behind a lease ended it
// (DESIGN.md 17). They ride the release command of a give-back (worker_exited,
// worker_unhealthy) or the leader's suspect/expire/reclaim of a stuck run
// (stalled), are kept in Lease.Reason, and are the bounded label values of
// the cluster's lease-end metric (EndReason).
const (
	// ReasonWorkerExited: the worker process exited, or its attach stream
	// closed, without completing, failing or giving the lease back.
	ReasonWorkerExited = "worker_exited"
	// ReasonWorkerUnhealthy: the sidecar's health probe of the worker failed
	// threshold times in a row.
	ReasonWorkerUnhealthy = "worker_unhealthy"
	// ReasonStalled: the lease showed no progress (checkpoint or progress
	// mark) within its profile's progress timeout; the cluster suspected,
	// expired and reclaimed it.
	ReasonStalled = "stalled"
)

// End reasons that are not worker verdicts, for EndReason's labels.
const (
	endCompleted     = "completed"
	endFailed        = "failed"
	endGivenBack     = "given_back"
	endExpired       = "expired"
	endRevoked       = "revoked"
	endWaiting       = "waiting"
	endSessionClosed = "session_closed"
)

// EndReasons lists every value EndReason returns, so a metric can start
// each at zero.
func EndReasons() []string {
	return []string{endCompleted, endFailed, endGivenBack, ReasonWorkerExited, ReasonWorkerUnhealthy,
		ReasonStalled, endExpired, endRevoked, endWaiting, endSessionClosed}
}

// EndReason classifies how a lease ended into a small, fixed set (a metric
// label never carries free text): the status the lease ended in, the
// outcome of a release and its reason.
func EndReason(st Status, outcome Outcome, reason string) string {
	switch st {
	case StatusReleased:
		switch {
		case outcome == OutcomeCompleted:
			return endCompleted
		case outcome == OutcomeFailed:
			return endFailed
		case reason == ReasonWorkerExited || reason == ReasonWorkerUnhealthy || reason == ReasonStalled:
			return reason
		case reason == sessionClosedReason:
			return endSessionClosed
		}
		return endGivenBack
	case StatusReclaimed:
		if reason == ReasonStalled {
			return ReasonStalled
		}
		return endExpired
	case StatusPausedWaiting:
		return endWaiting
	}
	return endRevoked
}

// sessionClosedReason is the reason closeSession gives the leases it
// releases.
const sessionClosedReason = "session closed"
