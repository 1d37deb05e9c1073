package httpapi

import (
	"github.com/fencepost/fencepost/fence/api"
)

// decodeFast decodes body exactly as decodeBody would: the plain shape
// clients send is parsed by hand (parse: api.ParseHeartbeatRequest says
// why), anything else goes to decodeBody, which decides and words the
// error. FuzzDecodeHeartbeat and FuzzDecodeCheckpoint hold the two paths
// to the same result.
//
// The request is returned by value: the leader decodes one per heartbeat
// and per checkpoint, and only the encoding/json path needs it on the heap.
func decodeFast[T any](body []byte, parse func([]byte) (T, bool)) (T, error) {
	if r, ok := parse(body); ok {
		return r, nil
	}
	var req T
	err := decodeBody(body, &req)
	return req, err
}

// decodeHeartbeat decodes a heartbeat body (api.ParseHeartbeatRequest).
func decodeHeartbeat(body []byte) (api.HeartbeatRequest, error) {
	return decodeFast(body, api.ParseHeartbeatRequest)
}

// decodeCheckpoint decodes a checkpoint body (api.ParseCheckpointRequest).
func decodeCheckpoint(body []byte) (api.CheckpointRequest, error) {
	return decodeFast(body, api.ParseCheckpointRequest)
}
