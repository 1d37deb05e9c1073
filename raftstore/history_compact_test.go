package raftstore

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/stretchr/testify/require"
)

// historySeed reruns TestHistoryStoresRandomEventsExactly with the seed a
// failure printed.
var historySeed = flag.Uint64("historyseed", 0, "seed of TestHistoryStoresRandomEventsExactly (0: a random one)")

// roomyHistory keeps everything it is given.
var roomyHistory = historyLimits{perTask: 1 << 20, perTaskBytes: 1 << 40, totalBytes: 1 << 50, feed: 1 << 20}

// storeAndRead adds evs to a new history one add at a time and returns
// them as recorded (numbered) and as the feed and the task logs give them
// back, in the same order.
func storeAndRead(t *testing.T, evs []api.HistoryEvent) (want, fromFeed, fromTasks []api.HistoryEvent) {
	t.Helper()
	h := newHistory(roomyHistory)
	for i := range evs {
		e := evs[i]
		h.add([]api.HistoryEvent{e}, false)
		e.Seq = uint64(i + 1)
		want = append(want, e)
	}
	for since := uint64(0); ; {
		feed, wake := h.since(since, false)
		if wake != nil {
			break
		}
		require.False(t, feed.Reset)
		fromFeed = append(fromFeed, feed.Events...)
		since = feed.Next
	}
	seen := map[string]int{}
	logs := map[string][]api.HistoryEvent{}
	for _, e := range want {
		if e.TaskID == "" {
			continue
		}
		if _, ok := logs[e.TaskID]; !ok {
			th, ok := h.task(e.TaskID)
			require.True(t, ok, e.TaskID)
			logs[e.TaskID] = th.Events
		}
		fromTasks = append(fromTasks, logs[e.TaskID][seen[e.TaskID]])
		seen[e.TaskID]++
	}
	return want, fromFeed, fromTasks
}

// requireSameEvents compares event by event: a diff of thousands of
// events at once takes testify minutes to print.
func requireSameEvents(t *testing.T, want, got []api.HistoryEvent, msg string, args ...any) {
	t.Helper()
	what := fmt.Sprintf(msg, args...)
	require.Len(t, got, len(want), what)
	for i := range want {
		require.Equal(t, want[i], got[i], "%s: event %d", what, i)
	}
}

// withTask drops the events without a task id, which only the feed keeps.
func withTask(evs []api.HistoryEvent) []api.HistoryEvent {
	var out []api.HistoryEvent
	for _, e := range evs {
		if e.TaskID != "" {
			out = append(out, e)
		}
	}
	return out
}

// decodedTime is t as a raft entry carries it: JSON-encoded by the leader,
// decoded by the node applying it.
func decodedTime(t *testing.T, tm time.Time) time.Time {
	t.Helper()
	b, err := json.Marshal(tm)
	require.NoError(t, err)
	var out time.Time
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

func TestHistoryEventRoundTripsEveryField(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	cases := []api.HistoryEvent{
		{}, // no task: the feed's alone
		{Kind: "acquire", TaskID: "zero-time"},
		// Every field, the coded ones from their tables.
		{Index: 7, Time: t0, Kind: "checkpoint", TaskID: "t1", Epoch: 3, WorkerID: "w1", SessionID: "s1",
			Status: lease.StatusActive, State: lease.TaskLeased, Reason: lease.ReasonStalled, By: "sidecar/a",
			CheckpointSeq: 9, Step: "step-2", Key: "k1", Method: "POST", URL: "svc/x/y",
			EffectState: lease.EffectIntent, HTTPStatus: 201, Error: "stale_epoch", Count: 4,
			TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"},
		// Every coded field outside its table, extreme numbers, a local time.
		{Index: math.MaxUint64, Time: t0.Local(), Kind: "kind_from_the_future", TaskID: "t1", Epoch: math.MaxUint64,
			WorkerID: "w2", SessionID: "s1", Status: "status?", State: "state?", Reason: "a free-text reason",
			By: "sidecar/a", CheckpointSeq: math.MaxUint64, Step: "ü", Key: "k\x00", Method: "PROPFIND",
			URL: "u", EffectState: "effect?", HTTPStatus: -1, Error: "error?", Count: math.MaxUint64, TraceID: "t"},
		{Kind: api.EventBlocked, TaskID: "t2", HTTPStatus: math.MinInt, Time: time.Unix(0, 0).UTC()},
		{Kind: api.EventInDoubt, TaskID: "t2", HTTPStatus: math.MaxInt, Time: time.Unix(-1, 999_999_999).UTC()},
		// Times nanoseconds cannot hold, and zones neither UTC nor Local.
		{Kind: "expire", TaskID: "t3", Time: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)},
		{Kind: "expire", TaskID: "t3", Time: time.Date(1500, 6, 1, 0, 0, 0, 0, time.UTC).Local()},
		{Kind: "expire", TaskID: "t3", Time: time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)},
		{Kind: "expire", TaskID: "t3", Time: t0.In(time.FixedZone("", 2*3600))},
		{Kind: "expire", TaskID: "t3", Time: t0.In(time.FixedZone("IST", 5*3600+1800))},
		{Kind: "expire", TaskID: "t3", Time: decodedTime(t, t0.In(time.FixedZone("", -(9*3600+1800))))},
		{Kind: "expire", TaskID: "t3", Time: time.Time{}.In(time.FixedZone("X", 60))},
	}
	covered := map[string]bool{"Seq": true} // the history numbers every event
	typ := reflect.TypeFor[api.HistoryEvent]()
	for _, c := range cases {
		v := reflect.ValueOf(c)
		for i := range typ.NumField() {
			if typ.Field(i).IsExported() && !v.Field(i).IsZero() {
				covered[typ.Field(i).Name] = true
			}
		}
	}
	for i := range typ.NumField() {
		if f := typ.Field(i); f.IsExported() {
			require.True(t, covered[f.Name], "no case sets api.HistoryEvent.%s: give it a non-zero value here, and storedEvent a place to keep it", f.Name)
		}
	}
	want, fromFeed, fromTasks := storeAndRead(t, cases)
	requireSameEvents(t, want, fromFeed, "from the feed")
	requireSameEvents(t, withTask(want), fromTasks, "from the task logs")
}

// A time from the clock has a monotonic reading; no decoded entry does,
// and the history keeps the time without it.
func TestHistoryKeepsTimesWithoutTheirMonotonicReading(t *testing.T) {
	now := time.Now()
	_, fromFeed, _ := storeAndRead(t, []api.HistoryEvent{{Kind: "acquire", TaskID: "a", Time: now}})
	require.Equal(t, now.Round(0), fromFeed[0].Time)
	require.True(t, now.Equal(fromFeed[0].Time))
}

// pick returns one of the values, or an empty or an unknown string.
func pick(rng *rand.Rand, known ...string) string {
	switch rng.IntN(4) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("unknown-%x", rng.Uint32())
	}
	return known[rng.IntN(len(known))]
}

// randUint is zero, small, or anything.
func randUint(rng *rand.Rand) uint64 {
	switch rng.IntN(3) {
	case 0:
		return 0
	case 1:
		return rng.Uint64N(300)
	}
	return rng.Uint64() >> rng.UintN(64)
}

func randTime(t *testing.T, rng *rand.Rand) time.Time {
	if rng.IntN(8) == 0 {
		return time.Time{}
	}
	// Mostly around now, sometimes anywhere a time can print as RFC 3339.
	tm := time.Unix(1_700_000_000+rng.Int64N(1e9), rng.Int64N(1e9))
	if rng.IntN(4) == 0 {
		tm = time.Date(1+rng.IntN(9998), time.Month(1+rng.IntN(12)), 1+rng.IntN(28), 0, 0, 0, rng.IntN(1e9), time.UTC).
			Add(time.Duration(rng.Int64N(int64(24 * time.Hour))))
	}
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("", 3600*(rng.IntN(27)-12)),
		time.FixedZone("", 60*(rng.IntN(1500)-720)), time.FixedZone("ZZT", 60*(rng.IntN(1500)-720))}
	tm = tm.In(zones[rng.IntN(len(zones))])
	if rng.IntN(2) == 0 {
		return decodedTime(t, tm) // as applied entries carry it
	}
	return tm
}

func randEvent(t *testing.T, rng *rand.Rand) api.HistoryEvent {
	var kinds []string
	for o := range 20 {
		kinds = append(kinds, lease.Op(o).String())
	}
	kinds = append(kinds, api.EventInDoubt, api.EventSessionRelease, api.EventBlocked)
	var errs []string
	for _, e := range lease.Errors() {
		errs = append(errs, e.Code)
	}
	return api.HistoryEvent{
		Index: randUint(rng), Time: randTime(t, rng), Kind: pick(rng, kinds...),
		TaskID: pick(rng, "t0", "t1", "t2", "t3"), Epoch: randUint(rng),
		WorkerID: pick(rng, "w0", "w1"), SessionID: pick(rng, "s0", "s1"),
		Status:        lease.Status(pick(rng, string(lease.StatusActive), string(lease.StatusReleased), string(lease.StatusSuspectDead))),
		State:         lease.TaskState(pick(rng, string(lease.TaskPending), string(lease.TaskLeased), string(lease.TaskCancelled))),
		Reason:        pick(rng, "given_back", "session idle", lease.ReasonWorkerExited, "expired", "no_lease"),
		By:            pick(rng, "sidecar/a", "sidecar/b", "operator/x"),
		CheckpointSeq: randUint(rng), Step: pick(rng, "fetch", "upload"),
		Key: pick(rng, "k1", "k2"), Method: pick(rng, "POST", "PUT"), URL: pick(rng, "svc/a", "svc/b?q"),
		EffectState: lease.EffectState(pick(rng, string(lease.EffectIntent), string(lease.EffectDone), string(lease.EffectInDoubt))),
		HTTPStatus:  int(int64(randUint(rng))) * (1 - 2*rng.IntN(2)),
		Error:       pick(rng, errs...), Count: randUint(rng), TraceID: pick(rng, "4bf92f3577b34da6a3ce929d0e0e4736"),
	}
}

func TestHistoryStoresRandomEventsExactly(t *testing.T) {
	seed := *historySeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -args -historyseed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	evs := make([]api.HistoryEvent, 3000)
	for i := range evs {
		evs[i] = randEvent(t, rng)
	}
	want, fromFeed, fromTasks := storeAndRead(t, evs)
	requireSameEvents(t, want, fromFeed, "seed %d, from the feed", seed)
	requireSameEvents(t, withTask(want), fromTasks, "seed %d, from the task logs", seed)
}

// refHistory is the bounding of the history as it was when it kept
// api.HistoryEvent: TestHistoryBoundsRandomEventsAsBefore checks the
// stored form evicts the same events.
type refHistory struct {
	lim     historyLimits
	tasks   map[string][]api.HistoryEvent
	dropped map[string]uint64
	recent  []string // least recently changed first
	bytes   int
}

func (r *refHistory) add(e api.HistoryEvent) {
	id := e.TaskID
	if id == "" {
		return
	}
	r.unlink(id)
	r.recent = append(r.recent, id)
	r.tasks[id] = append(r.tasks[id], e)
	r.bytes += eventBytes(&e)
	for evs := r.tasks[id]; len(evs) > 1 && (len(evs) > r.lim.perTask || r.taskBytes(evs) > r.lim.perTaskBytes); evs = r.tasks[id] {
		r.bytes -= eventBytes(&evs[0])
		r.tasks[id] = evs[1:]
		r.dropped[id]++
	}
	for r.bytes > r.lim.totalBytes && r.recent[0] != id {
		r.forget(r.recent[0])
	}
}

func (r *refHistory) forget(id string) {
	r.unlink(id)
	r.bytes -= r.taskBytes(r.tasks[id])
	delete(r.tasks, id)
	delete(r.dropped, id)
}

func (r *refHistory) unlink(id string) {
	for i, x := range r.recent {
		if x == id {
			r.recent = append(r.recent[:i], r.recent[i+1:]...)
			return
		}
	}
}

func (r *refHistory) taskBytes(evs []api.HistoryEvent) int {
	n := 0
	for i := range evs {
		n += eventBytes(&evs[i])
	}
	return n
}

func TestHistoryBoundsRandomEventsAsBefore(t *testing.T) {
	seed := *historySeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -args -historyseed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	one := eventBytes(&api.HistoryEvent{})
	lim := historyLimits{perTask: 1 + rng.IntN(6), perTaskBytes: one * (1 + rng.IntN(6)), totalBytes: one * (2 + rng.IntN(20)), feed: 1 + rng.IntN(50)}
	h := newHistory(lim)
	ref := &refHistory{lim: lim, tasks: map[string][]api.HistoryEvent{}, dropped: map[string]uint64{}}
	var all []api.HistoryEvent
	for i := range 2000 {
		e := randEvent(t, rng)
		forget := e.TaskID != "" && rng.IntN(30) == 0 // the task's deletion
		h.add([]api.HistoryEvent{e}, forget)
		e.Seq = uint64(i + 1)
		ref.add(e)
		if forget {
			ref.forget(e.TaskID)
		}
		all = append(all, e)
		tasks, bytes := h.size()
		require.Equal(t, len(ref.tasks), tasks, "seed %d, event %d", seed, i)
		require.Equal(t, ref.bytes, bytes, "seed %d, event %d", seed, i)
	}
	for _, id := range []string{"t0", "t1", "t2", "t3"} {
		th, ok := h.task(id)
		want, known := ref.tasks[id]
		require.Equal(t, known, ok, "seed %d, task %s", seed, id)
		if known {
			require.Equal(t, ref.dropped[id], th.Dropped, "seed %d, task %s", seed, id)
			requireSameEvents(t, want, th.Events, "seed %d, task %s", seed, id)
		}
	}
	feed, _ := h.since(0, false)
	requireSameEvents(t, all[len(all)-lim.feed:], feed.Events, "seed %d: the feed is the last events", seed)
}

// TestHistoryRecordSizes: the history keeps a taskLog per task and a
// storedEvent per event on every node; growing either is a memory
// regression on every member (issue 27).
func TestHistoryRecordSizes(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(storedEvent{}), uintptr(64))
	require.LessOrEqual(t, unsafe.Sizeof(taskLog{}), uintptr(64))
}

// TestHistoryDroppedSaturates: a task's count of dropped events stops at
// the largest it can hold instead of wrapping to a small number.
func TestHistoryDroppedSaturates(t *testing.T) {
	h := newHistory(historyLimits{perTask: 1, perTaskBytes: 1 << 20, totalBytes: 1 << 30, feed: 8})
	ev := func(i int) api.HistoryEvent {
		return api.HistoryEvent{Kind: "checkpoint", TaskID: "t", Epoch: 1, Time: time.Unix(int64(i), 0).UTC()}
	}
	h.add([]api.HistoryEvent{ev(0)}, false)
	h.tasks["t"].dropped = math.MaxUint32 - 1
	h.add([]api.HistoryEvent{ev(1)}, false)
	h.add([]api.HistoryEvent{ev(2)}, false)
	got, ok := h.task("t")
	require.True(t, ok)
	require.Equal(t, uint64(math.MaxUint32), got.Dropped)
	require.Len(t, got.Events, 1)
}
