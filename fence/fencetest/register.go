// Package fencetest holds test support shared by the fence stores' tests:
// the record of one fenced write as a racing client saw it, and the
// porcupine model of a fenced register that such histories must satisfy
// (invariant I3). It is imported only by tests.
package fencetest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Write is one write attempt seen by a client of a store: the epoch it
// carried, when it was called and returned, and whether it was accepted.
type Write struct {
	Client    int
	Task      string
	Epoch     uint64
	Call, Ret int64
	Accepted  bool
}

// String prints the write as one history line.
func (o Write) String() string {
	verdict := "stale"
	if o.Accepted {
		verdict = "accepted"
	}
	return fmt.Sprintf("[%d,%d] client %d %s epoch %d -> %s", o.Call, o.Ret, o.Client, o.Task, o.Epoch, verdict)
}

// FencedRegister is the porcupine model of one task: the state is the
// highest accepted epoch; a write is accepted iff its epoch is not lower.
// Histories are partitioned per task.
var FencedRegister = porcupine.Model{
	Partition: PartitionBy(func(input any) string { return input.(Write).Task }),
	Init:      func() any { return uint64(0) },
	Step: func(state, input, output any) (bool, any) {
		st, e := state.(uint64), input.(Write).Epoch
		if output.(bool) {
			return e >= st, e
		}
		return e < st, st
	},
	DescribeOperation: func(input, output any) string {
		op := input.(Write)
		op.Accepted = output.(bool)
		return op.String()
	},
}

// PartitionBy returns a porcupine Partition function that splits a history
// by key (a task id, usually), keeping the keys in order of first
// appearance so failures print the same way every run. Models whose
// operations on different keys are independent check much faster split.
func PartitionBy(key func(input any) string) func([]porcupine.Operation) [][]porcupine.Operation {
	return func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range h {
			k := key(op.Input)
			if _, ok := byKey[k]; !ok {
				order = append(order, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, k := range order {
			out = append(out, byKey[k])
		}
		return out
	}
}

// History is the flattened record of a race, ready to check and print.
type History struct {
	// Writes are every client's writes, ordered by call time.
	Writes []Write
	// Ops are the same writes as porcupine operations.
	Ops []porcupine.Operation
	// Accepted counts the accepted writes.
	Accepted int
}

// Flatten merges per-client histories.
func Flatten(perClient [][]Write) History {
	var h History
	for _, ws := range perClient {
		for _, op := range ws {
			h.Writes = append(h.Writes, op)
			h.Ops = append(h.Ops, porcupine.Operation{ClientId: op.Client, Input: op, Output: op.Accepted, Call: op.Call, Return: op.Ret})
			if op.Accepted {
				h.Accepted++
			}
		}
	}
	slices.SortFunc(h.Writes, func(a, b Write) int { return cmp.Compare(a.Call, b.Call) })
	return h
}

// Dump prints header and then every write, one per line, for a failure
// message.
func (h History) Dump(header string) string {
	var b strings.Builder
	b.WriteString(header + "\n")
	for _, op := range h.Writes {
		b.WriteString(op.String() + "\n")
	}
	return b.String()
}
