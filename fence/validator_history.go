package fence

import "fmt"

// AppliedWrite is one accepted write in the order it took effect in a
// downstream (a log position, a commit order).
type AppliedWrite struct {
	// Key is the task the write was fenced on.
	Key TaskKey
	// Epoch is the write's fencing token.
	Epoch uint64
}

// CheckEpochOrder verifies invariant I3 over writes listed in the order
// they took effect: per task, epochs never decrease. It returns an error
// naming the first violation. Fault tests run it over a downstream's log.
func CheckEpochOrder(writes []AppliedWrite) error {
	last := make(map[TaskKey]uint64)
	for i, w := range writes {
		if prev, ok := last[w.Key]; ok && w.Epoch < prev {
			return fmt.Errorf("fence: I3 violated at write %d: task %q (tenant %q) epoch %d after epoch %d",
				i, w.Key.Task, w.Key.Tenant, w.Epoch, prev)
		}
		last[w.Key] = w.Epoch
	}
	return nil
}
