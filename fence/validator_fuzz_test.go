package fence

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzValidatorModel drives a Validator over a MemStore with a sequence of
// writes decoded from the input, four bytes each (task, epoch, key,
// payload/failure), and compares every verdict with a model: a fenced
// register per task plus an idempotency table. Accepted epochs per task
// never decrease, a replay returns exactly the recorded response, and the
// handler runs only when the model says it must.
func FuzzValidatorModel(f *testing.F) {
	f.Add([]byte{0, 5, 1, 0, 0, 5, 1, 0, 0, 9, 1, 0, 0, 5, 2, 0})
	f.Add([]byte{0, 3, 0, 0, 1, 7, 0, 0, 0, 2, 0, 0, 1, 7, 0, 0, 1, 6, 0, 0})
	f.Add([]byte{2, 4, 3, 1, 2, 4, 3, 0, 2, 4, 3, 2, 2, 4, 3, 2, 2, 5, 3, 1})
	f.Add([]byte{0, 0, 0, 0, 1, 1, 1, 3, 1, 1, 1, 1, 1, 2, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		store, err := NewMemStore(MemStoreConfig{})
		require.NoError(t, err)
		v, err := NewValidator(Config{Store: store})
		require.NoError(t, err)

		type rec struct {
			payload byte
			body    string
		}
		maxSeen := map[string]uint64{}
		records := map[string]rec{}
		runs := 0
		for i := 0; i+4 <= len(data); i += 4 {
			task := "task-" + strconv.Itoa(int(data[i]%3))
			epoch := uint64(data[i+1] % 10)
			key := ""
			if k := data[i+2] % 4; k != 0 {
				key = "key-" + strconv.Itoa(int(k))
			}
			payload := data[i+3] % 2
			fail := data[i+3]&2 != 0
			input := in(FormatEpoch(epoch), task, key, "payload-"+strconv.Itoa(int(payload)))
			ran := false
			res := v.Check(context.Background(), input, func(ctx context.Context) (*Response, error) {
				ran = true
				runs++
				if fail {
					return &Response{Status: http.StatusServiceUnavailable}, nil
				}
				return &Response{Status: 200, Body: []byte(fmt.Sprintf("run %d", runs))}, nil
			})
			step := fmt.Sprintf("op %d: task %s epoch %d key %q payload %d fail %v", i/4, task, epoch, key, payload, fail)

			seen, known := maxSeen[task]
			r, done := records[task+"/"+key]
			switch {
			case epoch == 0:
				require.NotNil(t, res.Problem, step)
				require.Equal(t, ProblemMalformedToken, res.Problem.Type, step)
			case known && epoch < seen:
				require.NotNil(t, res.Problem, step)
				require.Equal(t, ProblemStaleToken, res.Problem.Type, step)
			case key != "" && done && r.payload != payload:
				require.NotNil(t, res.Problem, step)
				require.Equal(t, ProblemPayloadMismatch, res.Problem.Type, step)
			case key != "" && done:
				require.Equal(t, Replayed, res.Outcome, step)
				require.Equal(t, r.body, string(res.Response.Body), step)
				maxSeen[task] = epoch
			default:
				require.Equal(t, Executed, res.Outcome, step)
				require.True(t, ran, step)
				maxSeen[task] = epoch
				if key != "" && !fail {
					records[task+"/"+key] = rec{payload: payload, body: string(res.Response.Body)}
				}
			}
			if res.Outcome != Executed {
				require.False(t, ran, "handler ran on %s", step)
			}
			got, _ := store.MaxSeen(TaskKey{Task: task})
			require.Equal(t, maxSeen[task], got, step)
		}
	})
}
