package fault

import (
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

// op builds a porcupine operation over [call, ret].
func op(client int, in, out any, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
}

// The checkers must be able to fail: these histories break I1, I2 and I3
// and must be rejected, while their correct twins pass.
func TestLeaseModelRejectsViolations(t *testing.T) {
	acq := func(c int) leaseInput { return leaseInput{Kind: opAcquire, Task: "x", Client: c} }
	rel := func(c int, e uint64) leaseInput { return leaseInput{Kind: opRelease, Task: "x", Client: c, Epoch: e} }
	granted := func(e uint64) leaseOutput { return leaseOutput{OK: true, Epoch: e} }
	ok := leaseOutput{OK: true}
	model := leaseModel.ToModel()

	good := []porcupine.Operation{
		op(0, acq(0), granted(5), 0, 10), op(1, acq(1), leaseOutput{Code: "lease_held"}, 11, 12),
		op(0, rel(0, 5), ok, 13, 14), op(1, acq(1), granted(7), 15, 16),
	}
	require.Equal(t, porcupine.Ok, porcupine.CheckOperationsTimeout(model, good, 0))

	twoHolders := []porcupine.Operation{ // I1: a grant while another is held
		op(0, acq(0), granted(5), 0, 10), op(1, acq(1), granted(7), 11, 12),
	}
	require.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(model, twoHolders, 0))

	epochBack := []porcupine.Operation{ // I2: a later grant with a lower epoch
		op(0, acq(0), granted(5), 0, 10), op(0, rel(0, 5), ok, 11, 12), op(1, acq(1), granted(4), 13, 14),
	}
	require.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(model, epochBack, 0))

	unknownThenRefused := []porcupine.Operation{ // an unknown acquire may explain a refusal
		op(0, acq(0), leaseOutput{Unknown: true}, 0, 100), op(1, acq(1), leaseOutput{Code: "lease_held"}, 11, 12),
	}
	require.Equal(t, porcupine.Ok, porcupine.CheckOperationsTimeout(model, unknownThenRefused, 0))
}

func TestFencedRegisterRejectsStaleAcceptance(t *testing.T) {
	good := []porcupine.Operation{
		op(0, uint64(5), true, 0, 1), op(1, uint64(7), true, 2, 3), op(0, uint64(5), false, 4, 5),
	}
	require.Equal(t, porcupine.Ok, porcupine.CheckOperationsTimeout(fencedRegister, good, 0))
	stale := []porcupine.Operation{ // I3: epoch 5 accepted after 7
		op(0, uint64(5), true, 0, 1), op(1, uint64(7), true, 2, 3), op(0, uint64(5), true, 4, 5),
	}
	require.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(fencedRegister, stale, 0))
	// Concurrent writes may take effect in either order.
	concurrent := []porcupine.Operation{op(0, uint64(5), true, 0, 10), op(1, uint64(7), true, 0, 10)}
	require.Equal(t, porcupine.Ok, porcupine.CheckOperationsTimeout(fencedRegister, concurrent, 0))
}
