package request

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/proxy/leases"
)

// keyPrefix versions the derivation: a change of scheme must not collide
// with keys already stored downstream.
const keyPrefix = "fp1-"

// MaxActionIDLen bounds X-Fencing-Action-Id.
const MaxActionIDLen = 200

// ActionKey derives the Idempotency-Key of a worker-named action. It
// depends only on the task and the action id, never on the epoch, so a
// new owner repeating the action sends the same key.
func ActionKey(taskID, actionID string) string {
	var b [keyInputBuf]byte
	in := append(b[:0], taskID...)
	in = append(in, 0)
	in = append(in, actionID...)
	return hashKey(in)
}

// OrdinalKey derives the Idempotency-Key of the ordinal-th write (1-based)
// forwarded since checkpoint seq. A new owner resumes from the same
// checkpoint and repeats the same writes in the same order, so it derives
// the same keys. The double NUL keeps this space apart from ActionKey's:
// an action id is visible ASCII and cannot contain NUL.
func OrdinalKey(taskID string, seq, ordinal uint64) string {
	var b [keyInputBuf]byte
	in := append(b[:0], taskID...)
	in = append(in, 0, 0)
	in = strconv.AppendUint(in, seq, 10)
	in = append(in, 0)
	in = strconv.AppendUint(in, ordinal, 10)
	return hashKey(in)
}

// keyInputBuf fits the hash input of the longest task id and action id
// on the stack, so deriving a key allocates only the key itself.
const keyInputBuf = fence.MaxTaskLen + 1 + MaxActionIDLen

// hashKey is keyPrefix and the first 32 hex digits of sha256(in).
func hashKey(in []byte) string {
	sum := sha256.Sum256(in)
	var out [len(keyPrefix) + 32]byte
	copy(out[:], keyPrefix)
	hex.Encode(out[len(keyPrefix):], sum[:16])
	return string(out[:])
}

// validKeyText checks a worker-supplied Idempotency-Key or action id:
// 1..max visible ASCII characters, as the fence wire format requires.
func validKeyText(name, v string, max int) error {
	if v == "" || len(v) > max {
		return fmt.Errorf("%s: must be 1..%d characters", name, max)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e {
			return fmt.Errorf("%s: byte %d is not visible ASCII", name, i)
		}
	}
	return nil
}

// idempotencyKey decides the key of a forwarded write: the worker's own
// key unchanged; else one derived from the action id; else one derived
// from (checkpoint seq, ordinal), taking the next ordinal only now that
// the write is about to be sent.
func (p *Pipeline) idempotencyKey(scan *reqScan, l leases.Ref) (string, keyOrigin, bool, error) {
	if len(scan.idemKey) > 1 || len(scan.actionID) > 1 {
		return "", keyOrigin{}, false, fmt.Errorf("repeated %s or %s", fence.HeaderIdempotencyKey, HeaderActionID)
	}
	if len(scan.idemKey) == 1 {
		k := scan.idemKey[0]
		return k, keyOrigin{}, true, validKeyText(fence.HeaderIdempotencyKey, k, fence.MaxIdempotencyKeyLen)
	}
	if len(scan.actionID) == 1 {
		a := scan.actionID[0]
		if err := validKeyText(HeaderActionID, a, MaxActionIDLen); err != nil {
			return "", keyOrigin{}, false, err
		}
		return ActionKey(l.TaskID, a), keyOrigin{}, true, nil
	}
	seq, n, ok := p.keeper.NextWrite(l.TaskID, l.Epoch)
	if !ok {
		return "", keyOrigin{}, false, nil
	}
	return OrdinalKey(l.TaskID, seq, n), keyOrigin{seq: seq, ordinal: n}, true, nil
}
