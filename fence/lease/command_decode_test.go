package lease

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/jsonscan"
)

// randomCommand builds a command with every field at random: strings
// plain or needing escapes or not valid UTF-8, integers at their limits,
// times in several zones, an effect now and then. plain says it has
// nothing the fast path leaves to json.Unmarshal.
func randomCommand(rng *rand.Rand) (c Command, plain bool) {
	plain = true
	str := func() string {
		switch rng.IntN(12) {
		case 0:
			return ""
		case 1:
			plain = false
			return []string{`a"b`, `back\slash`, "line\nbreak", "<tag>&amp", "ctl\x01", "bad\xffutf8", "\u2028sep"}[rng.IntN(7)]
		case 2:
			return []string{"été", "日本語", "emoji 🚀", "\x7f del"}[rng.IntN(4)]
		}
		const alpha = "abcdefghijklmnopqrstuvwxyz0123456789-_/.:"
		b := make([]byte, 1+rng.IntN(40))
		for i := range b {
			b[i] = alpha[rng.IntN(len(alpha))]
		}
		return string(b)
	}
	bytes := func() []byte {
		switch rng.IntN(4) {
		case 0:
			return nil
		case 1:
			return []byte{}
		}
		b := make([]byte, rng.IntN(300))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	u64 := func() uint64 {
		return []uint64{0, 1, 9, 10, 255, 256, math.MaxUint32, math.MaxInt64, math.MaxUint64, rng.Uint64()}[rng.IntN(10)]
	}
	i64 := func() int64 {
		return []int64{0, 1, -1, math.MaxInt64, math.MinInt64, rng.Int64(), -rng.Int64()}[rng.IntN(7)]
	}
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("", 5*3600+1800), time.FixedZone("X", -7*3600)}
	c.Op = Op(rng.IntN(256))
	c.RequestID, c.TaskID, c.SessionID, c.WorkerID, c.LeaseID, c.Owner = str(), str(), str(), str(), str(), str()
	c.Time = time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).In(zones[rng.IntN(len(zones))])
	if rng.IntN(3) == 0 {
		c.Quota = &Quota{Sessions: int(i64()), Tasks: int(i64()), Bytes: i64(), TotalBytes: i64()}
		if rng.IntN(4) == 0 {
			c.Quota = &Quota{}
		}
	}
	c.Epoch, c.Seq, c.SeqWindow = u64(), u64(), u64()
	c.Create = rng.IntN(2) == 0
	c.Profile, c.Step, c.Reason = str(), str(), str()
	c.TTL, c.Heartbeat, c.Priority = time.Duration(i64()), time.Duration(i64()), int(i64())
	c.Payload, c.Data, c.Result = bytes(), bytes(), bytes()
	if rng.IntN(3) == 0 {
		c.Deadline = StampOf(time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)))
	}
	c.Outcome = Outcome(str())
	if rng.IntN(8) == 0 {
		c.Effect = &Effect{Key: str(), Epoch: u64(), Method: "POST", URL: str(), State: EffectIntent, Body: bytes()}
		plain = false
	}
	return c, plain
}

func jsonDecode(data []byte) (Command, error) {
	var c Command
	err := json.Unmarshal(data, &c)
	return c, err
}

// TestDecodeCommandMatchesJSON: for commands as json.Marshal writes them,
// and for those bytes changed at random (a byte, a key's case, spaces, a
// duplicate key, a leading zero), DecodeCommand succeeds exactly when
// json.Unmarshal does and gives the same command; and every command with
// nothing to escape takes the fast path.
func TestDecodeCommandMatchesJSON(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 3))
	fast := 0
	for i := range 3000 {
		c, plain := randomCommand(rng)
		data, err := json.Marshal(&c)
		require.NoError(t, err)
		var f Command
		hit := decodeCommandFast(jsonscan.New(data), &f)
		if plain {
			require.True(t, hit, "seed %d case %d: a plain command left the fast path: %s", seed, i, data)
			fast++
		}
		inputs := [][]byte{data, mutate(rng, data), mutate(rng, data), mutate(rng, mutate(rng, data))}
		for _, in := range inputs {
			want, werr := jsonDecode(in)
			var got Command
			gerr := DecodeCommand(in, &got)
			require.Equal(t, werr == nil, gerr == nil, "seed %d case %d: %q: json %v, ours %v", seed, i, in, werr, gerr)
			if werr == nil {
				require.True(t, reflect.DeepEqual(want, got), "seed %d case %d: %q:\njson %+v\nours %+v", seed, i, in, want, got)
			}
		}
	}
	require.Greater(t, fast, 100, "seed %d", seed)
}

// mutate changes data in one of the ways an entry not written by
// json.Marshal could differ.
func mutate(rng *rand.Rand, data []byte) []byte {
	b := append([]byte(nil), data...)
	if len(b) < 3 {
		return b
	}
	i := 1 + rng.IntN(len(b)-2)
	switch rng.IntN(9) {
	case 0:
		b[i] = byte(rng.IntN(256))
	case 1:
		return append(b[:i:i], append([]byte(" "), b[i:]...)...)
	case 2:
		return []byte(strings.Replace(string(b), `"task"`, `"Task"`, 1))
	case 3:
		return []byte(strings.Replace(string(b), `{"op":`, `{"epoch":7,"op":`, 1))
	case 4:
		return []byte(strings.Replace(string(b), `"epoch":`, `"epoch":0`, 1))
	case 5:
		return []byte(strings.Replace(string(b), `"seq":`, `"seq":-`, 1))
	case 6:
		return b[:i]
	case 7:
		return []byte(strings.Replace(string(b), `"step":"`, `"step":null,"x":"`, 1))
	case 8:
		return []byte(strings.Replace(string(b), `"quota":{`, `"quota":{"s":1,"tb":-4},"quota":{`, 1))
	}
	return b
}

// TestDecodeCommandKnowsEveryField: a field added to Command must be
// decoded by the fast path too, or every command would take the slow
// one. The command below sets every field but the effect (left to
// json.Unmarshal); a new field fails the first check until it is set
// here, and the second until the fast path reads it.
func TestDecodeCommandKnowsEveryField(t *testing.T) {
	c := Command{Op: OpCheckpoint, RequestID: "r", Time: time.Unix(1, 2).UTC(), TaskID: "t", SessionID: "s",
		WorkerID: "w", LeaseID: "l", Owner: "o", Quota: &Quota{Sessions: 1, Tasks: 2, Bytes: 3, TotalBytes: 4},
		Epoch: 5, Create: true, Profile: "p", TTL: 6, Heartbeat: 7, Priority: -8, Payload: []byte{9}, Seq: 10,
		Step: "st", SeqWindow: 11, Data: []byte{12}, Deadline: 13, Outcome: OutcomeCompleted, Result: []byte{14}, Reason: "why"}
	data, err := json.Marshal(&c)
	require.NoError(t, err)
	ct := reflect.TypeFor[Command]()
	for i := range ct.NumField() {
		name, _, _ := strings.Cut(ct.Field(i).Tag.Get("json"), ",")
		if name != "effect" {
			require.Contains(t, string(data), `"`+name+`":`, "set Command.%s in this test", ct.Field(i).Name)
		}
	}
	var got Command
	require.True(t, decodeCommandFast(jsonscan.New(data), &got), "the fast path must read %s", data)
	require.True(t, reflect.DeepEqual(c, got), "%+v", got)
}

// FuzzDecodeCommand: on any bytes, DecodeCommand and json.Unmarshal agree.
func FuzzDecodeCommand(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		c, _ := randomCommand(rng)
		data, _ := json.Marshal(&c)
		f.Add(data)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"op":1,"quota":{}}`))
	f.Add([]byte(`{"quota":{"s":1,"b":3},"quota":{"t":2},"task":"a","task":"b"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		want, werr := jsonDecode(data)
		var got Command
		gerr := DecodeCommand(data, &got)
		require.Equal(t, werr == nil, gerr == nil, "%q: json %v, ours %v", data, werr, gerr)
		if werr == nil {
			require.True(t, reflect.DeepEqual(want, got), "%q", data)
		}
	})
}

// BenchmarkDecodeCommand prices decoding a checkpoint command as a
// member does for every entry it applies, against json.Unmarshal.
func BenchmarkDecodeCommand(b *testing.B) {
	c := Command{Op: OpCheckpoint, RequestID: "6f1c2a9e-4d7b-4c3e-9a51-0b8d2e7f1a34", Time: time.Now().UTC(),
		TaskID: "bench-task-000123", SessionID: "sess-9a8b7c6d5e4f", Owner: "worker/agent-7", Epoch: 42, Seq: 17,
		SeqWindow: 1 << 20, Step: "step-17", Data: make([]byte, 256)}
	data, err := json.Marshal(&c)
	require.NoError(b, err)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got Command
			if err := DecodeCommand(data, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got Command
			if err := json.Unmarshal(data, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
}
