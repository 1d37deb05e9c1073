package httpapi

import (
	"github.com/fencepost/fencepost/fence/api"
)

// decodeHeartbeat decodes a heartbeat body exactly as decodeBody would:
// the plain shape sidecars send is parsed by hand (api.ParseHeartbeatRequest,
// which says why), anything else goes to decodeBody, which decides and
// words the error. FuzzDecodeHeartbeat holds the two to the same result.
//
// The request is returned by value: the leader decodes one per heartbeat,
// and only the encoding/json path needs it on the heap.
func decodeHeartbeat(body []byte) (api.HeartbeatRequest, error) {
	if r, ok := api.ParseHeartbeatRequest(body); ok {
		return r, nil
	}
	var req api.HeartbeatRequest
	err := decodeBody(body, &req)
	return req, err
}

// decodeCheckpoint is decodeHeartbeat for a checkpoint body
// (api.ParseCheckpointRequest); FuzzDecodeCheckpoint holds the two paths
// to the same result.
func decodeCheckpoint(body []byte) (api.CheckpointRequest, error) {
	if r, ok := api.ParseCheckpointRequest(body); ok {
		return r, nil
	}
	var req api.CheckpointRequest
	err := decodeBody(body, &req)
	return req, err
}
