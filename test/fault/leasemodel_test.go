package fault

import (
	"fmt"
	"github.com/fencepost/fencepost/fence/fencetest"
	"math"

	"github.com/anishathalye/porcupine"
)

// The lease model checked with porcupine: per task (histories are
// partitioned by task), who holds the lease and the highest epoch ever
// granted. It encodes I1 (an acquire succeeds only when nobody holds the
// task) and I2 (every grant's epoch is above every earlier one).

type leaseOpKind int

const (
	opAcquire leaseOpKind = iota
	opRelease
	opLost // a heartbeat reply said the holder lost the lease
)

type leaseInput struct {
	Kind   leaseOpKind
	Task   string
	Client int
	Epoch  uint64 // release / lost: the epoch
}

type leaseOutput struct {
	OK      bool
	Epoch   uint64 // acquire: the epoch granted
	Code    string // the refusal's code
	Unknown bool   // the outcome never became known
}

type leaseState struct {
	Holder uint64 // epoch of the live lease; 0 none; unknownHolder when an unknown acquire took effect
	Max    uint64
}

const unknownHolder = math.MaxUint64

// refusalMeansHeld lists the acquire refusals that say the task has a
// live lease.
var refusalMeansHeld = map[string]bool{"lease_held": true, "not_claimable": true}

var leaseModel = porcupine.NondeterministicModel{
	Partition: fencetest.PartitionBy(func(input any) string { return input.(leaseInput).Task }),
	Init:      func() []any { return []any{leaseState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(leaseState), input.(leaseInput), output.(leaseOutput)
		switch in.Kind {
		case opAcquire:
			switch {
			case out.Unknown:
				if s.Holder == 0 {
					return []any{s, leaseState{Holder: unknownHolder, Max: unknownHolder}}
				}
				return []any{s}
			case out.OK:
				if s.Holder == 0 && out.Epoch > s.Max && s.Max != unknownHolder {
					return []any{leaseState{Holder: out.Epoch, Max: out.Epoch}}
				}
				return nil
			case refusalMeansHeld[out.Code]:
				if s.Holder != 0 {
					return []any{s}
				}
				return nil
			default:
				return []any{s} // other refusals say nothing about the holder
			}
		case opRelease, opLost:
			switch {
			case out.Unknown:
				if s.Holder == in.Epoch {
					return []any{s, leaseState{Max: s.Max}}
				}
				return []any{s}
			case out.OK:
				if s.Holder == in.Epoch {
					return []any{leaseState{Max: s.Max}}
				}
				if in.Kind == opLost {
					return []any{s} // lost after it was already released
				}
				return nil
			case out.Code == "not_holder" || out.Code == "stale_epoch":
				if s.Holder != in.Epoch {
					return []any{s}
				}
				return nil
			default:
				return []any{s} // other refusals say nothing about the holder
			}
		}
		return nil
	},
	Equal: func(a, b any) bool { return a.(leaseState) == b.(leaseState) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(leaseInput), output.(leaseOutput)
		res := "ok"
		switch {
		case out.Unknown:
			res = "unknown"
		case !out.OK:
			res = "refused " + out.Code
		}
		switch in.Kind {
		case opAcquire:
			if out.OK {
				return fmt.Sprintf("c%d acquire %s → epoch %d", in.Client, in.Task, out.Epoch)
			}
			return fmt.Sprintf("c%d acquire %s → %s", in.Client, in.Task, res)
		case opRelease:
			return fmt.Sprintf("c%d release %s epoch %d → %s", in.Client, in.Task, in.Epoch, res)
		}
		return fmt.Sprintf("c%d lost %s epoch %d", in.Client, in.Task, in.Epoch)
	},
	DescribeState: func(state any) string {
		s := state.(leaseState)
		return fmt.Sprintf("holder=%d max=%d", s.Holder, s.Max)
	},
}
