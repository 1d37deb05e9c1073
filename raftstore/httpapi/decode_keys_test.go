package httpapi

import (
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/stretchr/testify/require"
)

// TestDecodeRefusesAmbiguousKeys: repeated keys and case variants of field
// names are refused by the strict decoder and by the heartbeat fast path
// alike; the plain spellings still decode.
func TestDecodeRefusesAmbiguousKeys(t *testing.T) {
	bad := []string{
		`{"sessionId":"a","sessionId":"b","epoch":1}`,
		`{"SessionId":"a","epoch":1}`,
		`{"sessionid":"a","epoch":1}`,
		`{"sessionId":"a","epoch":1,"EPOCH":2}`,
	}
	for _, b := range bad {
		var req api.CheckpointRequest
		require.Error(t, decodeBody([]byte(b), &req), b)
	}
	var out api.OutcomeRequest
	require.Error(t, decodeBody([]byte(`{"epoch":1,"status":200,"header":{"A":["x"],"A":["y"]}}`), &out))
	require.NoError(t, decodeBody([]byte(`{"epoch":1,"status":200,"header":{"Status":["x"],"status":["y"]}}`), &out),
		"map keys are free-form")
	var req api.CheckpointRequest
	require.NoError(t, decodeBody([]byte(`{"sessionId":"a","epoch":1,"seq":2}`), &req))
	require.Equal(t, api.CheckpointRequest{SessionID: "a", Epoch: 1, Seq: 2}, req)

	for _, b := range []string{
		`{"leases":[{"taskId":"a","taskId":"b","epoch":1}]}`,
		`{"leases":[],"leases":[{"taskId":"a","epoch":1}]}`,
		`{"Leases":[{"taskId":"a","epoch":1}]}`,
		`{"leases":[{"TaskID":"a","epoch":1}]}`,
		`{"leases":[{"taskId":"a","epoch":1,"epoch":2}]}`,
	} {
		_, err := decodeHeartbeat([]byte(b))
		require.Error(t, err, b)
	}
}

// FuzzCheckKeysFastPath: the raw-byte scan refuses exactly what the token
// walk refuses, for the types the API decodes.
func FuzzCheckKeysFastPath(f *testing.F) {
	for _, s := range []string{`{}`, `{"sessionId":"a","epoch":1}`, `{"sessionId":"a","sessionId":"b"}`,
		`{"SessionId":"a"}`, `{"session\u0049d":"a","sessionId":"b"}`, `{"epoch":1,"header":{"A":["x"],"A":["y"]}}`,
		`{"leases":[{"taskId":"a","epoch":1},{"TaskId":"b"}]}`, `[1,2]`, `{"a":`, `{"data":"AQI=","seq":3}`} {
		f.Add([]byte(s))
	}
	types := []reflect.Type{reflect.TypeOf(&api.CheckpointRequest{}), reflect.TypeOf(&api.OutcomeRequest{}),
		reflect.TypeOf(&api.HeartbeatRequest{})}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !utf8.Valid(body) || !json.Valid(body) {
			return
		}
		for _, ty := range types {
			sc := keyScanner{b: body}
			fast := sc.value(ty)
			if fast == errSlow {
				continue
			}
			slow := walkKeys(body, ty)
			require.Equal(t, fast == nil || fast == errSyntax, slow == nil, "%s %q: fast %v, slow %v", ty, body, fast, slow)
		}
	})
}
