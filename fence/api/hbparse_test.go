package api

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/jsonscan"
	"github.com/fencepost/fencepost/fence/lease"
)

// randomResponse is a reply as the cluster could send it; some strings
// need escapes, so the fast path must hand those to encoding/json.
func randomResponse(rng *rand.Rand) HeartbeatResponse {
	strs := []string{"", "t1", "task/with/slashes", "ü-ñ", `quote"d`, "tab\tbed", "<html>", "a b"}
	r := HeartbeatResponse{ValidForMs: rng.Int64N(1<<40) - 1<<20}
	switch rng.IntN(4) {
	case 0:
	case 1:
		r.Leases = []LeaseState{}
	default:
		for range 1 + rng.IntN(4) {
			r.Leases = append(r.Leases, LeaseState{TaskID: strs[rng.IntN(len(strs))], Epoch: rng.Uint64(),
				Status: lease.Status(strs[rng.IntN(len(strs))]), ValidForMs: rng.Int64() - 1<<62,
				Signal: strs[rng.IntN(len(strs))], Reason: strs[rng.IntN(len(strs))]})
		}
	}
	return r
}

// TestParseHeartbeatResponseReadsWhatJSONReads: over random replies,
// whatever the fast path accepts it reads exactly as encoding/json does,
// and it accepts every reply without escapes.
func TestParseHeartbeatResponseReadsWhatJSONReads(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 1))
	accepted := 0
	for i := range 2000 {
		want := randomResponse(rng)
		body, err := json.Marshal(want)
		require.NoError(t, err)
		got, ok := ParseHeartbeatResponse(body)
		var viaJSON HeartbeatResponse
		require.NoError(t, json.Unmarshal(body, &viaJSON))
		if ok {
			accepted++
			require.Equal(t, viaJSON, got, "seed %d, case %d: %s", seed, i, body)
		} else {
			require.Contains(t, string(body), `\`, "seed %d, case %d: a plain reply went the slow way: %s", seed, i, body)
		}
	}
	require.Greater(t, accepted, 100, "seed %d", seed)
}

func TestParseHeartbeatResponseShapes(t *testing.T) {
	for body, want := range map[string]HeartbeatResponse{
		`{}`: {},
		` { "validForMs" : -5 , "leases" : null } `: {ValidForMs: -5},
		`{"leases":[],"validForMs":0}`:              {Leases: []LeaseState{}},
		`{"validForMs":9223372036854775807,"leases":[{"taskId":"t","epoch":18446744073709551615,"status":"active","validForMs":-9223372036854775808}]}`: {
			ValidForMs: 1<<63 - 1, Leases: []LeaseState{{TaskID: "t", Epoch: 1<<64 - 1, Status: lease.StatusActive, ValidForMs: -1 << 63}}},
	} {
		got, ok := ParseHeartbeatResponse([]byte(body))
		require.True(t, ok, body)
		require.Equal(t, want, got, body)
	}
	// Each of these encoding/json reads (or refuses) by rules of its own:
	// the fast path declines them all.
	for _, body := range []string{
		`{"ValidForMs":1}`, `{"validForMs":1,"validForMs":2}`, `{"validForMs":1.0}`, `{"validForMs":1e3}`,
		`{"validForMs":01}`, `{"validForMs":9223372036854775808}`, `{"leases":[{"taskId":"\u0074"}]}`,
		`{"leases":[{"other":1}]}`, `{"leases":[{"epoch":-1}]}`, `{"validForMs":1}x`, `{"leases":{}}`,
		`{"leases":nul}`, "{\"leases\":[{\"taskId\":\"\xff\"}]}", `{"validForMs":-}`, ``, `[]`,
	} {
		_, ok := ParseHeartbeatResponse([]byte(body))
		require.False(t, ok, body)
	}
}

// FuzzParseHeartbeatResponse: the fast path never accepts what
// encoding/json refuses, nor reads anything differently.
func FuzzParseHeartbeatResponse(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 7))
	for range 20 {
		b, _ := json.Marshal(randomResponse(rng))
		f.Add(b)
	}
	f.Add([]byte(`{"validForMs":1,"leases":[{"taskId":"t","epoch":2,"status":"active","validForMs":3,"signal":"s","reason":"r"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := ParseHeartbeatResponse(body)
		if !ok {
			return
		}
		var want HeartbeatResponse
		require.NoError(t, json.Unmarshal(body, &want), fmt.Sprintf("%q", body))
		require.Equal(t, want, got, "%q", body)
	})
}

// BenchmarkParseHeartbeatResponse prices a sidecar reading a reply with
// four leases, by hand and with encoding/json, in one run.
func BenchmarkParseHeartbeatResponse(b *testing.B) {
	r := HeartbeatResponse{ValidForMs: 9000}
	for i := range 4 {
		r.Leases = append(r.Leases, LeaseState{TaskID: fmt.Sprintf("task-%d", i), Epoch: uint64(1000 + i), Status: lease.StatusActive, ValidForMs: 9000})
	}
	body, err := json.Marshal(r)
	require.NoError(b, err)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := ParseHeartbeatResponse(body); !ok {
				b.Fatal("not the plain shape")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out HeartbeatResponse
			if err := json.Unmarshal(body, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestParseHeartbeatRequestSizesTheListOnce: the leader parses a request
// per heartbeat, so its lease list is reserved once, not grown by
// doubling (five allocations for ten leases). What is left is one string
// per task id, the list and the cursor.
func TestParseHeartbeatRequestSizesTheListOnce(t *testing.T) {
	const n = 10
	body := []byte(`{"leases":[`)
	for i := range n {
		if i > 0 {
			body = append(body, ',')
		}
		body = fmt.Appendf(body, `{"taskId":"task-number-%03d","epoch":%d}`, i, 100+i)
	}
	body = append(body, "]}"...)
	req, ok := ParseHeartbeatRequest(body)
	require.True(t, ok)
	require.Len(t, req.Leases, n)
	allocs := testing.AllocsPerRun(100, func() { ParseHeartbeatRequest(body) })
	require.LessOrEqual(t, allocs, float64(n+2), "allocations for a request of %d leases", n)
}

// TestParseListHintIsCapped: a body of braces does not make the parser
// reserve a list for each of them.
func TestParseListHintIsCapped(t *testing.T) {
	body := []byte(`{"leases":[{"taskId":"a","epoch":1}],"x":"` + strings.Repeat("{", 100_000) + `"}`)
	_, ok := ParseHeartbeatRequest(body)
	require.False(t, ok, "an unknown key is not the plain shape")
	p := jsonscan.New([]byte(`[{"taskId":"a","epoch":1}]` + strings.Repeat("{", 100_000)))
	out, ok := parseList(p, held)
	require.True(t, ok)
	require.Len(t, out, 1)
	require.LessOrEqual(t, cap(out), maxListHint)
}
