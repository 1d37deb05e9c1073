package httpapi

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/stretchr/testify/require"
)

// randomTime covers the zero time, UTC and offset zones, whole seconds and
// every nanosecond width RFC3339Nano trims.
func randomTime(r *rand.Rand) time.Time {
	if r.IntN(6) == 0 {
		return time.Time{}
	}
	t := time.Unix(r.Int64N(4e9), r.Int64N(1e9)>>r.IntN(30))
	switch r.IntN(4) {
	case 0:
		return t.UTC()
	case 1:
		return t.In(time.FixedZone("x", (r.IntN(47)-23)*1800))
	case 2:
		return t.Truncate(time.Second).UTC()
	}
	return t.Local()
}

func randomBytes(r *rand.Rand) []byte {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, r.IntN(40))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func randomDuration(r *rand.Rand) time.Duration {
	d := time.Duration(r.Int64N(int64(time.Hour)))
	if r.IntN(2) == 0 {
		d = d.Truncate(time.Millisecond)
	}
	return d
}

func randomLease(r *rand.Rand) lease.Lease {
	s := func() string { return hbIDs[r.IntN(len(hbIDs))] }
	l := lease.Lease{TaskID: s(), WorkerID: s(), SessionID: s(), Epoch: r.Uint64() >> r.IntN(64),
		AcquiredAt: lease.StampOf(randomTime(r)), ExpiresAt: lease.StampOf(randomTime(r)), HeartbeatAt: lease.StampOf(randomTime(r)), TTL: randomDuration(r),
		Status: lease.Status(s()), StatusAt: lease.StampOf(randomTime(r)), Reason: s(), ProgressAt: lease.StampOf(randomTime(r))}
	if r.IntN(2) == 0 { // else the default id, derived from the epoch
		l.SetID(s())
	}
	return l
}

func randomTask(r *rand.Rand) lease.Task {
	s := func() string { return hbIDs[r.IntN(len(hbIDs))] }
	t := lease.Task{ID: s(), Profile: s(), TTL: randomDuration(r), Heartbeat: randomDuration(r), Priority: r.IntN(200) - 100,
		Payload: randomBytes(r), State: lease.TaskState(s()), CreatedAt: lease.StampOf(randomTime(r)), UpdatedAt: lease.StampOf(randomTime(r)),
		ClaimableAt: lease.StampOf(randomTime(r)), Attempts: r.Uint64() >> r.IntN(64), MaxEpoch: r.Uint64() >> r.IntN(64),
		Owner: s()}
	if r.IntN(3) != 0 {
		x := t.More()
		x.WaitDeadline, x.Signal, x.Result, x.Reason = lease.StampOf(randomTime(r)), randomBytes(r), randomBytes(r), s()
	}
	if r.IntN(3) != 0 {
		l := randomLease(r)
		t.Lease = &l
	}
	if r.IntN(3) != 0 {
		t.Checkpoint = &lease.Checkpoint{Seq: r.Uint64() >> r.IntN(64), Step: s(), Data: randomBytes(r),
			Epoch: r.Uint64() >> r.IntN(64), At: lease.StampOf(randomTime(r))}
	}
	return t
}

// TestAppendTaskMatchesJSON: the hand encoders write json.Marshal's bytes
// for every task, grant and heartbeat they take, and decline the rest.
func TestAppendTaskMatchesJSON(t *testing.T) {
	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, 3))
	for i := range 5000 {
		task := randomTask(r)
		g := api.Grant{Lease: randomLease(r), Task: randomTask(r), ValidForMs: r.Int64N(1e6) - 10,
			HeartbeatMs: r.Int64N(1e5), TokenSignature: hbIDs[r.IntN(len(hbIDs))]}
		for _, body := range []any{&task, g, randomHeartbeatResponse(r)} {
			want, err := json.Marshal(body)
			require.NoError(t, err)
			got, ok := encodeReply(nil, body)
			require.True(t, ok, "seed %d, case %d: %#v declined", seed, i, body)
			require.Equal(t, string(want), string(got), "seed %d, case %d: %#v", seed, i, body)
		}
	}
}

func TestAppendTaskDeclinesWhatItDoesNotCover(t *testing.T) {
	base := lease.Task{ID: "t", CreatedAt: lease.StampOf(time.Now())}
	withHistory, withJournal := base, base
	withHistory.More().History = []lease.Lease{{}}
	withJournal.More().Journal = []*lease.Effect{}
	for name, body := range map[string]any{
		"history": &withHistory, "journal": &withJournal,
		"in doubt": api.Grant{InDoubt: []*lease.Effect{}}, "grant's task journal": api.Grant{Task: withJournal},
		"other type": api.Session{},
	} {
		_, ok := encodeReply(nil, body)
		require.False(t, ok, name)
	}
	var nilTask *lease.Task
	got, ok := encodeReply(nil, nilTask)
	require.True(t, ok)
	require.Equal(t, "null", string(got))
}

// BenchmarkEncodeTask compares the checkpoint reply's encoding by hand
// and by encoding/json.
func BenchmarkEncodeTask(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	task := randomTask(r)
	l := randomLease(r)
	task.Lease, task.Checkpoint = &l, &lease.Checkpoint{Seq: 7, Step: "step-7", Data: make([]byte, 256), Epoch: 3, At: lease.StampOf(time.Now())}
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = encodeReply(buf[:0], &task)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(&task)
		}
	})
}
