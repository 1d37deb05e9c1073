package fence

import "strings"

// sequenceCases are the fenced register's decision sequences: stale
// epochs, per-task floors, idempotent replay across a reclaim, payload
// mismatch, unrecorded 5xx, in-progress duplicates, the bounded store's
// refusal and the body limit. sign is as in requestCases.
func sequenceCases(sign func(key int, task string, epoch uint64, holder string) string) []vSequence {
	w := func(epoch, key, body string, h *vHandler) *vStep {
		return post(fenceHdr(epoch, "t1", "", "", key), body, h)
	}
	wt := func(task, epoch string) *vStep {
		s := post(fenceHdr(epoch, task, "", "", ""), "x", created(`{"task":"`+task+`"}`))
		s.Target = "/v1/tasks/" + task + "/writes"
		return s
	}
	cookie := &vHandler{Status: 201, Headers: []vHeader{{"Content-Type", "application/json"}, {"Set-Cookie", "session=secret"}, {"X-Write-Id", "w-1"}}, Body: `{"id":1}`}
	signed := func(epoch uint64, holder, key string) *vStep {
		return post(fenceHdr(FormatEpoch(epoch), "t1", holder, sign(0, "t1", epoch, holder), key), "s", created(`{"e":"`+FormatEpoch(epoch)+`"}`))
	}
	return []vSequence{
		{Name: "stale epoch rejected after a newer one", Config: vConfig{Signatures: "off"}, Steps: []*vStep{
			w("5", "", "a", created(`{"w":1}`)),
			w("8", "", "b", created(`{"w":2}`)),
			w("5", "", "c", created(`{"w":3}`)),
			w("8", "", "d", created(`{"w":4}`)),
			w("7", "", "e", created(`{"w":5}`)),
			w("9", "", "f", created(`{"w":6}`)),
		}},
		{Name: "floors are per task", Config: vConfig{Signatures: "off"}, Steps: []*vStep{
			wt("a", "10"), wt("b", "3"), wt("a", "9"), wt("b", "2"), wt("b", "10"),
		}},
		{Name: "max uint64 epoch", Config: vConfig{Signatures: "off"}, Steps: []*vStep{
			w("18446744073709551614", "", "a", created(`{"w":1}`)),
			w("18446744073709551615", "", "b", created(`{"w":2}`)),
			w("18446744073709551614", "", "c", created(`{"w":3}`)),
			w("9007199254740993", "", "d", created(`{"w":4}`)),
		}},
		{Name: "idempotent replay, mismatch, and stale before replay", Config: vConfig{Signatures: "off"}, Steps: []*vStep{
			w("5", "k1", `{"amount":10}`, cookie),
			w("5", "k1", `{"amount":10}`, created(`{"id":"never"}`)),
			w("5", "k1", `{"amount":11}`, created(`{"id":"never"}`)),
			w("7", "k1", `{"amount":10}`, created(`{"id":"never"}`)),
			w("6", "k1", `{"amount":10}`, created(`{"id":"never"}`)),
			w("7", "k2", `{"amount":10}`, created(`{"id":2}`)),
		}},
		{Name: "payload fingerprint covers method and target", Config: vConfig{Signatures: "off"}, Steps: []*vStep{
			w("5", "k1", "same", created(`{"id":1}`)),
			{Method: "PUT", Target: "/v1/tasks/t1/writes", Headers: fenceHdr("5", "t1", "", "", "k1"), Body: "same", Handler: created(`{"id":"never"}`)},
			{Method: "POST", Target: "/v1/tasks/t1/writes?x=1", Headers: fenceHdr("5", "t1", "", "", "k1"), Body: "same", Handler: created(`{"id":"never"}`)},
			w("5", "k1", "same", created(`{"id":"never"}`)),
		}},
		{Name: "4xx is recorded and replayed", Config: vConfig{Signatures: "off"}, Steps: []*vStep{
			w("3", "k1", "x", &vHandler{Status: 409, Headers: []vHeader{{"Content-Type", "text/plain"}}, Body: "conflict in the service"}),
			w("3", "k1", "x", created(`{"id":"never"}`)),
		}},
		{Name: "5xx is not recorded; the retry runs", Config: vConfig{Signatures: "off"}, Steps: []*vStep{
			w("3", "k1", "x", &vHandler{Status: 503, Headers: []vHeader{{"Content-Type", "text/plain"}}, Body: "backend down"}),
			w("3", "k1", "x", created(`{"id":"second try"}`)),
			w("3", "k1", "x", created(`{"id":"never"}`)),
		}},
		{Name: "rejections do not raise the floor", Config: vConfig{Signatures: "required"}, Steps: []*vStep{
			signed(5, "w1", ""),
			post(fenceHdr("9", "t1", "w1", sign(0, "t1", 5, "w1"), ""), "forged", created(`{"never":1}`)),
			post(fenceHdr("9", "t1", "w1", sign(1, "t1", 9, "w1"), ""), "unknown key", created(`{"never":1}`)),
			post(fenceHdr("9", "t1", "w1", "", ""), "unsigned", created(`{"never":1}`)),
			post(fenceHdr("9", "t1", "w1", sign(0, "t1", 9, "w1"), "bad key"), "bad key", created(`{"never":1}`)),
			signed(6, "w1", ""),
			signed(5, "w2", ""),
		}},
		{Name: "reclaim: the new owner replays the old owner's step", Config: vConfig{Signatures: "required"}, Steps: []*vStep{
			signed(4, "worker-A", "run_456/step-2"),
			post(fenceHdr("4", "t1", "worker-A", sign(0, "t1", 4, "worker-A"), "run_456/step-3"), "a3", created(`{"by":"A"}`)),
			signed(9, "worker-B", "run_456/step-2"),
			signed(4, "worker-A", "run_456/step-3"),
			post(fenceHdr("9", "t1", "worker-B", sign(0, "t1", 9, "worker-B"), "run_456/step-3"), "a3", created(`{"by":"B never"}`)),
		}},
		{Name: "duplicate while the first runs is in progress", Config: vConfig{Signatures: "off"}, MemoryOnly: true, Steps: []*vStep{
			w("2", "", "seed", created(`{"w":0}`)),
			{Method: "POST", Target: "/v1/tasks/t1/writes", Headers: fenceHdr("5", "t1", "", "", "k1"), Body: "p", Handler: created(`{"w":1}`),
				During: []*vStep{
					w("5", "k1", "p", created(`{"w":"dup never"}`)),
					w("6", "k1", "p", created(`{"w":"dup never"}`)),
					w("4", "k1", "p", created(`{"w":"stale never"}`)),
					w("1", "k9", "q", created(`{"w":"stale never"}`)),
				}},
			w("5", "k1", "p", created(`{"w":"never"}`)),
		}},
		{Name: "bounded store refuses a new task, keeps the floor", Config: vConfig{Signatures: "off", MaxTasks: 2}, MemoryOnly: true, Steps: []*vStep{
			wt("a", "5"), wt("b", "5"), wt("c", "5"), wt("a", "4"), wt("a", "6"), wt("b", "1"),
		}},
		{Name: "body limit for the fingerprint", Config: vConfig{Signatures: "off", MaxBodyBytes: 8}, Steps: []*vStep{
			w("5", "k1", "12345678", created(`{"w":1}`)),
			w("5", "k2", "123456789", created(`{"w":"never"}`)),
			w("5", "", "123456789", created(`{"w":"unkeyed, not read"}`)),
		}},
		{Name: "long idempotency key and task", Config: vConfig{Signatures: "off"}, Steps: []*vStep{
			post(fenceHdr("1", strings.Repeat("t", 256), "", "", strings.Repeat("k", 255)), "x", created(`{"w":1}`)),
			post(fenceHdr("1", strings.Repeat("t", 256), "", "", strings.Repeat("k", 255)), "x", created(`{"w":"never"}`)),
		}},
	}
}

// raceCases are racing epochs: every epoch is sent at once by its own
// writer for one task; afterwards max_seen is the highest epoch, the
// accepted epochs never decrease in the order the writes took effect,
// the highest epoch was accepted and every rejection named a floor
// above its epoch.
type vRace struct {
	Name   string   `json:"name"`
	Epochs []string `json:"epochs"`
	// Rounds repeats the race on a fresh task each time.
	Rounds int `json:"rounds"`
}

func raceCases() []vRace {
	spread := func(n int, f func(i int) uint64) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = FormatEpoch(f(i))
		}
		return out
	}
	return []vRace{
		{Name: "16 distinct epochs", Epochs: spread(16, func(i int) uint64 { return uint64(16 - i) }), Rounds: 5},
		{Name: "ties and a high straggler", Epochs: spread(12, func(i int) uint64 { return uint64(i%3 + 1) }), Rounds: 5},
		{Name: "top of the uint64 range", Epochs: spread(8, func(i int) uint64 { return 1<<64 - 1 - uint64(i) }), Rounds: 3},
	}
}
