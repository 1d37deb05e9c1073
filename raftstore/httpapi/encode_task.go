package httpapi

import (
	"encoding/base64"
	"strconv"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// Every acquire, claim and checkpoint replies with its task (and an
// acquire with its grant): at 64 concurrent checkpoints encoding/json's
// reflection over Task, its Lease and their nested MarshalJSON methods was
// a fifth of the leader's CPU (issue 27). Those replies are appended by
// hand like the heartbeat's. The bytes are exactly json.Marshal's
// (TestAppendTaskMatchesJSON, FuzzAppendTask); whatever this encoder does
// not cover (a lease history, a write journal, effects in doubt, a time
// RFC 3339 cannot write) reports !ok and the caller falls back to
// json.Marshal, so a rare shape costs speed, never correctness.

// appendTask appends t as JSON to b; ok is false (and b unspecified)
// when t needs json.Marshal.
func appendTask(b []byte, t *lease.Task) ([]byte, bool) {
	if t.History() != nil || t.Journal() != nil {
		return b, false
	}
	ok := true
	b = append(b, `{"taskId":`...)
	b = appendString(b, t.ID)
	b = append(b, `,"profile":`...)
	b = appendString(b, t.Profile)
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(t.Priority), 10)
	b = appendBytesField(b, `,"payload":`, t.Payload)
	b = append(b, `,"state":`...)
	b = appendString(b, string(t.State))
	b = appendTimeField(b, `,"createdAt":`, t.CreatedAt)
	b = appendTimeField(b, `,"updatedAt":`, t.UpdatedAt)
	b = appendTimeField(b, `,"claimableAt":`, t.ClaimableAt)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendUint(b, t.Attempts, 10)
	b = append(b, `,"maxEpoch":`...)
	b = strconv.AppendUint(b, t.MaxEpoch, 10)
	if t.Lease != nil {
		b = append(b, `,"lease":`...)
		b = appendLease(b, t.Lease, &ok)
	}
	if c := t.Checkpoint; c != nil {
		b = append(b, `,"checkpoint":{"seq":`...)
		b = strconv.AppendUint(b, c.Seq, 10)
		if c.Step != "" {
			b = append(b, `,"step":`...)
			b = appendString(b, c.Step)
		}
		b = appendBytesField(b, `,"data":`, c.Data)
		b = append(b, `,"epoch":`...)
		b = strconv.AppendUint(b, c.Epoch, 10)
		b = appendTimeField(b, `,"at":`, c.At)
		b = append(b, '}')
	}
	if !t.WaitDeadline().IsZero() {
		b = appendTimeField(b, `,"waitDeadline":`, t.WaitDeadline())
	}
	b = appendBytesField(b, `,"signal":`, t.Signal())
	b = appendBytesField(b, `,"result":`, t.Result())
	if t.Reason() != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, t.Reason())
	}
	if t.Owner != "" {
		b = append(b, `,"owner":`...)
		b = appendString(b, t.Owner)
	}
	b = appendDuration(b, `,"ttlMs":`, `,"ttlExtraNs":`, t.TTL)
	b = appendDuration(b, `,"heartbeatMs":`, `,"heartbeatExtraNs":`, t.Heartbeat)
	return append(b, '}'), ok
}

// appendLease appends l as JSON, clearing *ok on a time json.Marshal
// would refuse.
func appendLease(b []byte, l *lease.Lease, ok *bool) []byte {
	b = append(b, `{"leaseId":`...)
	b = appendString(b, l.ID())
	b = append(b, `,"taskId":`...)
	b = appendString(b, l.TaskID)
	b = append(b, `,"workerId":`...)
	b = appendString(b, l.WorkerID)
	b = append(b, `,"sessionId":`...)
	b = appendString(b, l.SessionID)
	b = append(b, `,"leaseEpoch":`...)
	b = strconv.AppendUint(b, l.Epoch, 10)
	b = appendTimeField(b, `,"acquiredAt":`, l.AcquiredAt)
	b = appendTimeField(b, `,"expiresAt":`, l.ExpiresAt)
	b = appendTimeField(b, `,"heartbeatAt":`, l.HeartbeatAt)
	b = append(b, `,"status":`...)
	b = appendString(b, string(l.Status))
	b = appendTimeField(b, `,"statusAt":`, l.StatusAt)
	if l.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, l.Reason)
	}
	if !l.ProgressAt.IsZero() {
		b = appendTimeField(b, `,"progressAt":`, l.ProgressAt)
	}
	b = appendDuration(b, `,"ttlMs":`, `,"ttlExtraNs":`, l.TTL)
	return append(b, '}')
}

// appendGrant appends g as JSON; ok is false when g needs json.Marshal.
func appendGrant(b []byte, g *api.Grant) ([]byte, bool) {
	if g.InDoubt != nil {
		return b, false
	}
	ok := true
	b = append(b, `{"lease":`...)
	b = appendLease(b, &g.Lease, &ok)
	b = append(b, `,"task":`...)
	b, tok := appendTask(b, &g.Task)
	b = append(b, `,"validForMs":`...)
	b = strconv.AppendInt(b, g.ValidForMs, 10)
	b = append(b, `,"heartbeatMs":`...)
	b = strconv.AppendInt(b, g.HeartbeatMs, 10)
	if g.TokenSignature != "" {
		b = append(b, `,"tokenSignature":`...)
		b = appendString(b, g.TokenSignature)
	}
	return append(b, '}'), ok && tok
}

// appendBytesField appends an omitempty []byte field as base64, the way
// encoding/json writes one.
func appendBytesField(b []byte, key string, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = append(b, key...)
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

// appendDuration appends d as the cluster's whole milliseconds and an
// omitted-when-zero nanosecond remainder (lease/json.go's convention).
func appendDuration(b []byte, msKey, extraKey string, d time.Duration) []byte {
	b = append(b, msKey...)
	b = strconv.AppendInt(b, d.Milliseconds(), 10)
	if extra := int64(d % time.Millisecond); extra != 0 {
		b = append(b, extraKey...)
		b = strconv.AppendInt(b, extra, 10)
	}
	return b
}

// appendTimeField appends a moment as time.Time.MarshalJSON writes it. A
// lease.Stamp is UTC and within the years 1678-2262, so unlike a
// time.Time it always has a JSON form.
func appendTimeField(b []byte, key string, t lease.Stamp) []byte {
	return t.AppendJSON(append(b, key...))
}

// encodeReply appends the hand-encodable replies; ok is false for any
// other body, which json.Marshal encodes.
func encodeReply(b []byte, body any) ([]byte, bool) {
	switch v := body.(type) {
	case api.HeartbeatResponse:
		return appendHeartbeat(b, &v), true
	case *lease.Task:
		if v == nil {
			return append(b, "null"...), true
		}
		return appendTask(b, v)
	case api.Grant:
		return appendGrant(b, &v)
	}
	return b, false
}
