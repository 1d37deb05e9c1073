package lease

import (
	"fmt"
)

// Ceilings the model and every front end enforce on what a client sends.
// They live here, beside the model, so the cluster API, the store and the
// sidecar refuse the same inputs.
const (
	// MaxCheckpointSeq is the highest checkpoint seq. It is 2^53-1, the
	// largest integer a JavaScript or JSON-number client holds exactly.
	// A checkpoint at the ceiling is final: the next one (explicit or
	// "seq omitted") is refused with ErrCheckpointSeq instead of wrapping
	// to 0, which would make generated idempotency keys repeat.
	MaxCheckpointSeq = 1<<53 - 1
	// MaxCheckpointSeqJump is how far an explicit checkpoint seq may
	// exceed the task's latest (0 when it has none): larger jumps are
	// refused with ErrCheckpointSeqJump. So no request, and no owner in a
	// lifetime, reaches the ceiling: that takes at least 2^37 accepted
	// checkpoints, over four years at the default per-identity rate limit
	// of 1,000 requests per second. A new owner therefore always finds
	// room above its predecessor's seq, which it must stay above (the
	// sidecar's idempotency keys are derived from it).
	MaxCheckpointSeqJump = 1 << 16
	// MinPriority and MaxPriority bound a task's priority.
	MinPriority = -1_000_000
	MaxPriority = 1_000_000
)

// TaskIDAlphabet documents the characters a task id may hold: ASCII
// letters and digits, and '.', '_', '-', ':' and '@' after the first
// character, which must be a letter or digit. Ids go into URL paths, log
// lines, file names of tools and the signed token's text; this alphabet
// keeps every one of them unambiguous: no '/', no "." or "..", no spaces,
// no bidirectional or invisible Unicode.
const TaskIDAlphabet = "A-Z a-z 0-9, then also . _ - : @ (first character a letter or digit)"

// CheckTaskID reports whether id is a valid task id of at most maxBytes
// bytes (the cluster's configured bound), naming the rule when it is not.
func CheckTaskID(id string, maxBytes int) error {
	if id == "" || len(id) > maxBytes {
		return fmt.Errorf("%w: taskId must be 1..%d characters of %s", ErrInvalid, maxBytes, TaskIDAlphabet)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if alnum || i > 0 && (c == '.' || c == '_' || c == '-' || c == ':' || c == '@') {
			continue
		}
		return fmt.Errorf("%w: taskId %q: character %d is outside %s", ErrInvalid, id, i+1, TaskIDAlphabet)
	}
	return nil
}

// CheckPriority reports whether p is within [MinPriority, MaxPriority].
func CheckPriority(p int) error {
	if p < MinPriority || p > MaxPriority {
		return fmt.Errorf("%w: priority must be in [%d, %d], got %d", ErrInvalid, MinPriority, MaxPriority, p)
	}
	return nil
}

// CheckCheckpointSeqJump reports whether an explicit seq is within window
// of the latest, prev (window 0: no bound, as for entries written before
// the rule).
func CheckCheckpointSeqJump(prev, seq, window uint64) error {
	if window > 0 && seq > prev && seq-prev > window {
		return fmt.Errorf("%w: seq may exceed the latest (%d) by at most %d, got %d", ErrCheckpointSeqJump, prev, window, seq)
	}
	return nil
}

// CheckCheckpointSeq reports whether an explicit seq is within the ceiling
// (0 means "the next one" and is always allowed here).
func CheckCheckpointSeq(seq uint64) error {
	if seq > MaxCheckpointSeq {
		return fmt.Errorf("%w: seq must be at most %d, got %d", ErrCheckpointSeq, uint64(MaxCheckpointSeq), seq)
	}
	return nil
}
