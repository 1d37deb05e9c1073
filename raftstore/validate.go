package raftstore

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/fence/lease"
)

// Bounds on free-text fields that have no configuration knob: large enough
// for any sane use, small enough that one request cannot bloat the log.
const (
	maxReasonBytes   = 1024
	maxStepBytes     = 1024
	maxKeyBytes      = 256
	maxMethodBytes   = 16
	maxURLBytes      = 4096
	maxDigestBytes   = 256
	maxHeaderBytes   = 16 << 10
	maxHeldLeases    = 4096
	maxWorkerIDBytes = 256
)

// validID reports whether s is a usable identifier: 1..maxBytes bytes of
// valid UTF-8 without control characters (fence.ValidID's rule). Ids end
// up in log lines, token signatures (newline-separated) and URLs, so
// control characters would make all three ambiguous.
func validID(s string, maxBytes int) bool { return fence.ValidID(s, maxBytes) == nil }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}

func tooLarge(field string, n, limit int) error {
	return fmt.Errorf("%w: %s is %d bytes, limit %d", ErrTooLarge, field, n, limit)
}

// checkTaskID applies the model's task id rule (lease.CheckTaskID) with
// the configured length bound.
func (c *Commands) checkTaskID(id string) error {
	if err := lease.CheckTaskID(id, c.cfg.MaxTaskIDBytes); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return nil
}

func checkPriority(p int) error {
	if err := lease.CheckPriority(p); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return nil
}

func checkSessionID(id string) error {
	if !validID(id, maxWorkerIDBytes) {
		return invalid("sessionId must be 1..%d bytes of UTF-8 without control characters", maxWorkerIDBytes)
	}
	return nil
}

func checkText(field, v string, limit int) error {
	if len(v) > limit {
		return tooLarge(field, len(v), limit)
	}
	if !utf8.ValidString(v) {
		return invalid("%s must be valid UTF-8", field)
	}
	return nil
}

func (c *Commands) checkBytes(field string, b []byte, limit int) error {
	if len(b) > limit {
		return tooLarge(field, len(b), limit)
	}
	return nil
}

func checkEpoch(epoch uint64) error {
	if epoch == 0 {
		return invalid("epoch is required")
	}
	return nil
}

// profile resolves a profile name ("" = the default profile).
func (c *Commands) profile(name string) (string, Profile, error) {
	if name == "" {
		name = c.cfg.DefaultProfile
	}
	p, ok := c.cfg.Profiles[name]
	if !ok {
		return "", Profile{}, fmt.Errorf("%w: %q", ErrUnknownProfile, name)
	}
	return name, p, nil
}

func checkOutcome(o lease.Outcome) error {
	switch o {
	case lease.OutcomeCompleted, lease.OutcomeFailed, lease.OutcomeGivenBack:
		return nil
	}
	return invalid("outcome must be completed, failed or given_back, not %q", o)
}

func (c *Commands) checkDurationMs(field string, ms int64, allowZero bool) (time.Duration, error) {
	if ms < 0 || (!allowZero && ms == 0) {
		return 0, invalid("%s must be positive", field)
	}
	d := time.Duration(ms) * time.Millisecond
	if d > c.cfg.MaxWait || ms > int64(c.cfg.MaxWait/time.Millisecond) {
		return 0, invalid("%s must be at most %s", field, c.cfg.MaxWait)
	}
	return d, nil
}

func headerSize(h map[string][]string) int {
	n := 0
	for k, vs := range h {
		n += len(k)
		for _, v := range vs {
			n += len(v)
		}
	}
	return n
}
