package lease

import (
	"encoding/json"
	"time"
)

// Durations travel as integer milliseconds in fields ending in "Ms", the
// convention of the whole cluster API, so a non-Go client never has to know
// Go's nanosecond time.Duration. A sub-millisecond remainder (a TTL/3
// heartbeat, say) rides in an extra "...ExtraNs" field, omitted when zero:
// snapshots go through this encoding and must restore replicas exactly.
// The wire types below drop the methods of
// Lease and Task, so encoding them does not recurse.
type (
	leaseWire Lease
	taskWire  Task
)

type leaseJSON struct {
	leaseWire
	TTLMs      int64 `json:"ttlMs"`
	TTLExtraNs int64 `json:"ttlExtraNs,omitempty"`
}

type taskJSON struct {
	taskWire
	TTLMs            int64 `json:"ttlMs"`
	TTLExtraNs       int64 `json:"ttlExtraNs,omitempty"`
	HeartbeatMs      int64 `json:"heartbeatMs"`
	HeartbeatExtraNs int64 `json:"heartbeatExtraNs,omitempty"`
}

// splitMs splits d into whole milliseconds and the nanoseconds left over.
func splitMs(d time.Duration) (ms, extraNs int64) {
	return d.Milliseconds(), int64(d % time.Millisecond)
}

func joinMs(ms, extraNs int64) time.Duration {
	return time.Duration(ms)*time.Millisecond + time.Duration(extraNs)
}

// MarshalJSON encodes the lease with its TTL in milliseconds.
func (l Lease) MarshalJSON() ([]byte, error) {
	v := leaseJSON{leaseWire: leaseWire(l)}
	v.TTLMs, v.TTLExtraNs = splitMs(l.TTL)
	return json.Marshal(v)
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (l *Lease) UnmarshalJSON(b []byte) error {
	var v leaseJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*l = Lease(v.leaseWire)
	l.TTL = joinMs(v.TTLMs, v.TTLExtraNs)
	return nil
}

// MarshalJSON encodes the task with its TTL and heartbeat interval in
// milliseconds.
func (t Task) MarshalJSON() ([]byte, error) {
	v := taskJSON{taskWire: taskWire(t)}
	v.TTLMs, v.TTLExtraNs = splitMs(t.TTL)
	v.HeartbeatMs, v.HeartbeatExtraNs = splitMs(t.Heartbeat)
	return json.Marshal(v)
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (t *Task) UnmarshalJSON(b []byte) error {
	var v taskJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*t = Task(v.taskWire)
	t.TTL = joinMs(v.TTLMs, v.TTLExtraNs)
	t.Heartbeat = joinMs(v.HeartbeatMs, v.HeartbeatExtraNs)
	return nil
}
