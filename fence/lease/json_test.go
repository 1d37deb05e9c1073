package lease

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// Task's wire form lists its fields by hand (taskJSON): a field added to
// Task or TaskMore and not there would be lost by every snapshot.
func TestTaskWireListsEveryField(t *testing.T) {
	wire := map[string]string{}
	wt := reflect.TypeFor[taskJSON]()
	for i := range wt.NumField() {
		wire[wt.Field(i).Name] = wt.Field(i).Tag.Get("json")
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[Task](), reflect.TypeFor[TaskMore]()} {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				continue
			}
			tag, ok := wire[f.Name]
			require.True(t, ok, "%s.%s is missing from taskJSON", typ.Name(), f.Name)
			require.Equal(t, f.Tag.Get("json"), tag, "%s.%s", typ.Name(), f.Name)
		}
	}
}

// Lease's wire form lists its fields by hand too (leaseJSON).
func TestLeaseWireListsEveryField(t *testing.T) {
	wire := map[string]string{}
	wt := reflect.TypeFor[leaseJSON]()
	for i := range wt.NumField() {
		wire[wt.Field(i).Name] = wt.Field(i).Tag.Get("json")
	}
	require.Equal(t, "leaseId", wire["LeaseID"])
	typ := reflect.TypeFor[Lease]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() || f.Tag.Get("json") == "-" {
			continue
		}
		require.Equal(t, f.Tag.Get("json"), wire[f.Name], "Lease.%s", f.Name)
	}
}

// A lease keeps no id of its own when its id is the default for its
// epoch, and writes the same bytes either way.
func TestLeaseIDDefaultIsNotKept(t *testing.T) {
	l := Lease{TaskID: "t", Epoch: 42, Status: StatusActive}
	require.Equal(t, "lease-42", l.ID())
	b, err := json.Marshal(l)
	require.NoError(t, err)
	require.Contains(t, string(b), `{"leaseId":"lease-42","taskId":"t"`)
	var back Lease
	require.NoError(t, json.Unmarshal(b, &back))
	require.Nil(t, back.id, "the default id is derived, not stored")
	require.Equal(t, l, back)

	for _, id := range []string{"L-b", "", "lease-41", "lease-042"} {
		c := l
		c.SetID(id)
		require.NotNil(t, c.id, id)
		require.Equal(t, id, c.ID())
		b, err := json.Marshal(c)
		require.NoError(t, err)
		var back Lease
		require.NoError(t, json.Unmarshal(b, &back))
		require.Equal(t, id, back.ID())
	}
	require.LessOrEqual(t, unsafe.Sizeof(Lease{}), uintptr(144), "a lease fits the 144-byte size class")
	require.LessOrEqual(t, unsafe.Sizeof(Task{}), uintptr(208), "a task fits the 208-byte size class")
}

// A task with every field set survives the wire, and one with none of
// TaskMore's comes back without it.
func TestTaskWireRoundTrips(t *testing.T) {
	l := Lease{id: new("l1"), TaskID: "t1", Epoch: 7, TTL: time.Second, Status: StatusReleased}
	full := Task{ID: "t1", Profile: "p", TTL: time.Second, Heartbeat: time.Second / 3, Priority: 3, Payload: []byte("x"),
		State: TaskFailed, CreatedAt: 1, UpdatedAt: 2, ClaimableAt: 3, Attempts: 4, MaxEpoch: 7, Lease: &l,
		Checkpoint: &Checkpoint{Seq: 1, Epoch: 7, At: 5}, Owner: "o",
		more: &TaskMore{History: []Lease{l}, WaitDeadline: 9, Signal: []byte("s"), Result: []byte("r"), Reason: "why",
			Journal: []*Effect{{Key: "k", Epoch: 7, State: EffectDone}}}}
	for _, task := range []Task{full, {ID: "t2", State: TaskPending}} {
		b, err := json.Marshal(task)
		require.NoError(t, err)
		var back Task
		require.NoError(t, json.Unmarshal(b, &back))
		require.Equal(t, task, back, "%s", b)
	}
}

func TestWireDurationsInMilliseconds(t *testing.T) {
	l := Lease{id: new("l1"), TaskID: "t1", Epoch: 7, TTL: 21 * time.Second, Status: StatusActive}
	task := Task{ID: "t1", TTL: 21 * time.Second, Heartbeat: 7 * time.Second, State: TaskLeased, Lease: &l, more: &TaskMore{History: []Lease{l}}}
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
