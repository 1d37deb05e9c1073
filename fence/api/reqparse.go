package api

import (
	"unicode/utf8"

	"github.com/fencepost/fencepost/fence/jsonscan"
)

// ParseCheckpointRequest parses the plain shape of a CheckpointRequest
// (the same rules as ParseHeartbeatRequest: each known key at most once,
// in any order, plain strings and integers, data as base64); ok is false
// when body is not that shape, which says nothing about whether it is
// valid. A checkpoint is the write an agent makes after every step, so
// the leader decodes one per step of every run.
func ParseCheckpointRequest(body []byte) (req CheckpointRequest, ok bool) {
	if !utf8.Valid(body) {
		return req, false
	}
	p := jsonscan.New(body)
	var seen [5]bool
	ok = p.Object(func(key []byte) bool {
		var ok bool
		switch k := string(key); {
		case k == "sessionId" && !seen[0]:
			seen[0] = true
			req.SessionID, ok = p.Str()
		case k == "epoch" && !seen[1]:
			seen[1] = true
			req.Epoch, ok = p.Uint()
		case k == "seq" && !seen[2]:
			seen[2] = true
			req.Seq, ok = p.Uint()
		case k == "step" && !seen[3]:
			seen[3] = true
			req.Step, ok = p.Str()
		case k == "data" && !seen[4]:
			seen[4] = true
			req.Data, ok = p.Base64()
		}
		return ok
	})
	if !ok || !p.End() {
		return CheckpointRequest{}, false
	}
	return req, true
}
