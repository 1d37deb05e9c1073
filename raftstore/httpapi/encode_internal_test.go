package httpapi

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/stretchr/testify/require"
)

// hbIDs are task ids that exercise both the copy path and the escaping
// fallback of appendString.
var hbIDs = []string{"", "t-1", "task/with/slash", `quote"d`, `back\slash`, "<b>&amp;", "tab\there",
	"ünïcode", "emoji-🦀", "\u2028line-sep", "ctl\x01", "nul\x00", "\xff\xfe bad utf8"}

func randomHeartbeatResponse(r *rand.Rand) api.HeartbeatResponse {
	resp := api.HeartbeatResponse{ValidForMs: r.Int64N(1e6) - 10}
	if r.IntN(8) != 0 {
		resp.Leases = []api.LeaseState{}
	}
	statuses := []lease.Status{lease.StatusActive, lease.StatusSuspectDead, lease.StatusExpired, lease.StatusRevoked, ""}
	signals := []string{"", api.SignalRevived, api.SignalLost, api.SignalRevoked, api.SignalWaiting}
	for range r.IntN(12) {
		resp.Leases = append(resp.Leases, api.LeaseState{
			TaskID:     hbIDs[r.IntN(len(hbIDs))],
			Epoch:      r.Uint64() >> r.IntN(64),
			Status:     statuses[r.IntN(len(statuses))],
			ValidForMs: r.Int64() >> r.IntN(64),
			Signal:     signals[r.IntN(len(signals))],
			Reason:     hbIDs[r.IntN(len(hbIDs))],
		})
	}
	return resp
}

func TestAppendHeartbeatMatchesJSON(t *testing.T) {
	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range 5000 {
		resp := randomHeartbeatResponse(r)
		want, err := json.Marshal(resp)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendHeartbeat(nil, &resp)), "seed %d, case %d: %#v", seed, i, resp)
	}
}

func FuzzAppendHeartbeat(f *testing.F) {
	for _, id := range hbIDs {
		f.Add(id, uint64(7), int64(20000), "active", "", id)
	}
	f.Fuzz(func(t *testing.T, task string, epoch uint64, valid int64, status, signal, reason string) {
		resp := api.HeartbeatResponse{ValidForMs: valid, Leases: []api.LeaseState{
			{TaskID: task, Epoch: epoch, Status: lease.Status(status), ValidForMs: valid, Signal: signal, Reason: reason},
			{TaskID: reason, Epoch: epoch / 3, Status: lease.Status(signal)},
		}}
		want, err := json.Marshal(resp)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendHeartbeat(nil, &resp)))
	})
}

// The bodies sidecars send must take the fast path (else it buys
// nothing), and decode to what encoding/json makes of them.
func TestParseHeartbeatTakesPlainBodies(t *testing.T) {
	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, 2))
	for i := range 2000 {
		var req api.HeartbeatRequest
		for range r.IntN(20) {
			req.Leases = append(req.Leases, api.HeldLease{TaskID: fmt.Sprintf("task-%d/ü", r.IntN(1e6)), Epoch: r.Uint64() >> r.IntN(64)})
		}
		body, err := json.Marshal(req)
		require.NoError(t, err)
		if r.IntN(2) == 0 {
			body, err = json.MarshalIndent(req, " ", "\t")
			require.NoError(t, err)
		}
		got, ok := api.ParseHeartbeatRequest(body)
		require.True(t, ok, "seed %d, case %d: %s", seed, i, body)
		require.Equal(t, req, got, "seed %d, case %d: %s", seed, i, body)
	}
	for _, body := range []string{`{}`, `{"leases":null}`, `{"leases":[]}`, ` { "leases" : [ { } ] } `, `{"leases":[{"epoch":0,"taskId":"x"}]}`,
		`{"leases":[{"taskId":"x","sinceProgressMs":7,"epoch":3}]}`} {
		_, ok := api.ParseHeartbeatRequest([]byte(body))
		require.True(t, ok, body)
	}
}

func TestParseHeartbeatLeavesTheRestToDecodeBody(t *testing.T) {
	for _, body := range []string{
		``, `   `, `{"leases":[{"taskId":"a\u0041","epoch":1}]}`, `{"Leases":[]}`, `{"leases":[],"leases":[]}`,
		`{"leases":[{"taskId":"a","taskId":"b"}]}`, `{"leases":[{"epoch":-1}]}`, `{"leases":[{"epoch":1.0}]}`,
		`{"leases":[{"epoch":1e3}]}`, `{"leases":[{"epoch":01}]}`, `{"leases":[{"epoch":18446744073709551616}]}`,
		`{"leases":[{"epoch":"1"}]}`, `{"leases":[{"holder":"x"}]}`, `{"leases":[]} {}`, `{"leases":[,]}`,
		`{"leases":[{"taskId":"a"},]}`, `{"leases":nul}`, `{"leases":true}`, `[]`, `{"leases":[{"taskId":"` + "\x01" + `"}]}`,
		"{\"leases\":[{\"taskId\":\"\xff\"}]}",
	} {
		_, ok := api.ParseHeartbeatRequest([]byte(body))
		require.False(t, ok, "%q must fall back to decodeBody", body)
	}
}

// fuzzFastPath holds a hand parser to decodeBody: whatever parse
// accepts, decodeBody accepts too, with the same result.
func fuzzFastPath[T any](f *testing.F, seeds []string, parse func([]byte) (T, bool)) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, ok := parse(body)
		if !ok {
			return
		}
		var slow T
		require.NoError(t, decodeBody(body, &slow), "fast path accepted what decodeBody refuses: %q", body)
		require.True(t, reflect.DeepEqual(slow, fast), "%q: fast %#v, encoding/json %#v", body, fast, slow)
	})
}

// FuzzDecodeHeartbeat holds api.ParseHeartbeatRequest to decodeBody.
func FuzzDecodeHeartbeat(f *testing.F) {
	fuzzFastPath(f, []string{`{}`, `{"leases":null}`, `{"leases":[{"taskId":"a","epoch":1},{"epoch":2,"taskId":"b"}]}`,
		` {"leases" :[ {"taskId":"ü","epoch":18446744073709551615} ] } `, `{"leases":[{"epoch":01}]}`, `{"leases":[{}]}`,
		`{"leases":[{"taskId":"a","taskId":"b","epoch":1}]}`, `{"leases":[],"leases":[]}`, `{"Leases":[]}`,
		`{"leases":[{"TaskId":"a","epoch":1}]}`, `{"leases":[{"taskId":"a","epoch":1,"epoch":2}]}`,
		`{"leases":[{"taskId":"a","epoch":1,"sinceProgressMs":250}]}`, `{"leases":[{"sinceProgressMs":1,"sinceProgressMs":2}]}`},
		api.ParseHeartbeatRequest)
}

// FuzzDecodeCheckpoint holds api.ParseCheckpointRequest to decodeBody.
func FuzzDecodeCheckpoint(f *testing.F) {
	fuzzFastPath(f, []string{`{}`, `{"sessionId":"s","epoch":3,"seq":4,"step":"fetch","data":"aGk="}`,
		` { "epoch" : 1 , "sessionId" : "ü" , "data" : "" } `, `{"epoch":01}`, `{"data":"a"}`, `{"data":null}`,
		`{"sessionId":"a","sessionId":"b"}`, `{"SessionId":"a"}`, `{"step":"a\"b"}`, `{"epoch":1.0}`,
		`{"epoch":18446744073709551616}`, `{"seq":-1}`, `{"epoch":1} x`, `{"other":1}`},
		api.ParseCheckpointRequest)
}

// TestCheckpointBodyTakesTheFastPath: what json.Marshal writes for a
// checkpoint (the Go client, the SDKs) is the plain shape.
func TestCheckpointBodyTakesTheFastPath(t *testing.T) {
	req := api.CheckpointRequest{SessionID: "sess-1", Epoch: 7, Seq: 3, Step: "step 3", Data: []byte("state")}
	body, err := json.Marshal(req)
	require.NoError(t, err)
	got, ok := api.ParseCheckpointRequest(body)
	require.True(t, ok, "%s", body)
	require.Equal(t, req, got)
}
