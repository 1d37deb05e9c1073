package lease

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAppendCommandWritesWhatMarshalWrites: for random commands (every
// field, strings that need escaping or not, zero and extreme values),
// AppendCommand writes exactly json.Marshal's bytes after what the buffer
// held, and a command with nothing to escape takes the fast path.
func TestAppendCommandWritesWhatMarshalWrites(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 5))
	fast := 0
	for i := range 3000 {
		c, _ := randomCommand(rng)
		if rng.IntN(10) == 0 {
			c = Command{Op: c.Op, Time: c.Time} // every omitempty field empty
		}
		want, werr := json.Marshal(&c)
		prefix := []byte("\x01prefix")
		got, gerr := AppendCommand(prefix, &c)
		require.Equal(t, werr == nil, gerr == nil, "seed %d case %d: %v / %v", seed, i, werr, gerr)
		if werr != nil {
			continue
		}
		require.Equal(t, "\x01prefix", string(got[:len(prefix)]), "seed %d case %d", seed, i)
		require.Equal(t, string(want), string(got[len(prefix):]), "seed %d case %d", seed, i)
		if _, ok := appendCommandFast(nil, &c); ok {
			fast++
		}
	}
	require.Greater(t, fast, 100, "seed %d: the fast path was hardly taken", seed)
	// A command with only plain strings always takes it.
	plain := Command{Op: OpAcquire, RequestID: "r-1", Time: time.Unix(5, 6).UTC(), TaskID: "t/1", Quota: &Quota{}, Create: true}
	_, ok := appendCommandFast(nil, &plain)
	require.True(t, ok)
}

// BenchmarkAppendCommand prices encoding a checkpoint command as the
// leader does for every proposal, against json.Marshal.
func BenchmarkAppendCommand(b *testing.B) {
	c := Command{Op: OpCheckpoint, RequestID: "6f1c2a9e-4d7b-4c3e-9a51-0b8d2e7f1a34", Time: time.Now().UTC(),
		TaskID: "bench-task-000123", SessionID: "sess-9a8b7c6d5e4f", Owner: "worker/agent-7", Epoch: 42, Seq: 17,
		SeqWindow: 1 << 20, Step: "step-17", Data: make([]byte, 256)}
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = AppendCommand(buf[:0], &c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
