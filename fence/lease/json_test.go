package lease

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWireDurationsInMilliseconds(t *testing.T) {
	l := Lease{LeaseID: "l1", TaskID: "t1", Epoch: 7, TTL: 21 * time.Second, Status: StatusActive}
	task := Task{ID: "t1", TTL: 21 * time.Second, Heartbeat: 7 * time.Second, State: TaskLeased, Lease: &l, History: []Lease{l}}
	b, err := json.Marshal(task)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	require.EqualValues(t, 21000, m["ttlMs"])
	require.EqualValues(t, 7000, m["heartbeatMs"])
	require.NotContains(t, m, "ttl")
	require.EqualValues(t, 21000, m["lease"].(map[string]any)["ttlMs"])
	require.EqualValues(t, 21000, m["history"].([]any)[0].(map[string]any)["ttlMs"])

	var back Task
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, task, back)

	// A sub-millisecond remainder survives: snapshots restore exactly.
	task.Heartbeat = 20 * time.Second / 3 // 6.666666666s
	b, err = json.Marshal(task)
	require.NoError(t, err)
	back = Task{}
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, task.Heartbeat, back.Heartbeat)
	require.Contains(t, string(b), `"heartbeatMs":6666,"heartbeatExtraNs":666666`)
}
