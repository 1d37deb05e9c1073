package api

import (
	"bytes"
	"unicode/utf8"

	"github.com/fencepost/fencepost/fence/jsonscan"
	"github.com/fencepost/fencepost/fence/lease"
)

// Heartbeats are the most frequent message between a sidecar and the
// cluster, and encoding/json's reflection was the largest single cost on
// both ends of one (the leader decoding the request, the sidecar the
// reply). The plain shapes the two sides send are parsed here by hand:
// any JSON whitespace, keys in any order, each at most once, strings
// without escapes, plain integers. Anything else (escapes, other or
// repeated keys, keys in another case, fractions, trailing data) makes
// the parser answer false and the caller use encoding/json, which
// decides and words the error: the fast path never accepts what
// encoding/json would refuse, nor reads anything differently
// (FuzzDecodeHeartbeat and FuzzParseHeartbeatResponse hold it to that).

// ParseHeartbeatRequest parses the plain shape of a HeartbeatRequest;
// ok is false when body is not that shape (which says nothing about
// whether it is valid).
func ParseHeartbeatRequest(body []byte) (req HeartbeatRequest, ok bool) {
	if !utf8.Valid(body) {
		return req, false
	}
	p := jsonscan.New(body)
	if !p.Lit('{') {
		return req, false
	}
	if !p.Lit('}') {
		key, kok := p.Raw()
		if !kok || string(key) != "leases" || !p.Lit(':') {
			return req, false
		}
		if req.Leases, ok = parseList(p, held); !ok || !p.Lit('}') {
			return HeartbeatRequest{}, false
		}
	}
	return req, p.End()
}

// ParseHeartbeatResponse parses the plain shape of a HeartbeatResponse
// (what the cluster sends); ok is false when body is not that shape.
func ParseHeartbeatResponse(body []byte) (resp HeartbeatResponse, ok bool) {
	if !utf8.Valid(body) {
		return resp, false
	}
	p := jsonscan.New(body)
	if !p.Lit('{') {
		return resp, false
	}
	if p.Lit('}') {
		return resp, p.End()
	}
	var seenValid, seenLeases bool
	for {
		key, kok := p.Raw()
		if !kok || !p.Lit(':') {
			return HeartbeatResponse{}, false
		}
		switch {
		case string(key) == "validForMs" && !seenValid:
			seenValid = true
			if resp.ValidForMs, ok = p.Int(); !ok {
				return HeartbeatResponse{}, false
			}
		case string(key) == "leases" && !seenLeases:
			seenLeases = true
			if resp.Leases, ok = parseList(p, leaseState); !ok {
				return HeartbeatResponse{}, false
			}
		default:
			return HeartbeatResponse{}, false
		}
		if p.Lit('}') {
			return resp, p.End()
		}
		if !p.Lit(',') {
			return HeartbeatResponse{}, false
		}
	}
}

// parseList reads null (a nil slice, as encoding/json leaves it) or an
// array of elements read by elem.
// maxListHint caps the capacity parseList reserves before it has read
// the list; longer lists grow as appends do.
const maxListHint = 64

var openBrace = []byte{'{'}

func parseList[T any](p *jsonscan.Cursor, elem func(*jsonscan.Cursor) (T, bool)) ([]T, bool) {
	if p.Peek('n') {
		return nil, p.Word("null")
	}
	if !p.Lit('[') {
		return nil, false
	}
	// Sized once from the objects left in the body, not grown by
	// doubling: the leader parses a list per heartbeat, and growing one
	// of ten leases took five allocations. The count only guesses the
	// capacity (a brace inside a string adds one) and is capped, so a
	// body of braces cannot make the parser reserve more than that.
	out := make([]T, 0, min(bytes.Count(p.Rest(), openBrace), maxListHint))
	if p.Lit(']') {
		return out, true
	}
	for {
		v, ok := elem(p)
		if !ok {
			return nil, false
		}
		out = append(out, v)
		if p.Lit(']') {
			return out, true
		}
		if !p.Lit(',') {
			return nil, false
		}
	}
}

// held reads one {"taskId":...,"epoch":...,"sinceProgressMs":...}.
func held(p *jsonscan.Cursor) (HeldLease, bool) {
	var h HeldLease
	var seen [3]bool
	ok := p.Object(func(key []byte) bool {
		var ok bool
		switch k := string(key); {
		case k == "taskId" && !seen[0]:
			seen[0] = true
			h.TaskID, ok = p.Str()
		case k == "epoch" && !seen[1]:
			seen[1] = true
			h.Epoch, ok = p.Uint()
		case k == "sinceProgressMs" && !seen[2]:
			seen[2] = true
			h.SinceProgressMs, ok = p.Uint()
		}
		return ok
	})
	return h, ok
}

// leaseState reads one LeaseState object.
func leaseState(p *jsonscan.Cursor) (LeaseState, bool) {
	var l LeaseState
	var seen [6]bool
	ok := p.Object(func(key []byte) bool {
		var ok bool
		switch k := string(key); {
		case k == "taskId" && !seen[0]:
			seen[0] = true
			l.TaskID, ok = p.Str()
		case k == "epoch" && !seen[1]:
			seen[1] = true
			l.Epoch, ok = p.Uint()
		case k == "status" && !seen[2]:
			seen[2] = true
			var s []byte
			s, ok = p.Raw()
			l.Status = status(s)
		case k == "validForMs" && !seen[3]:
			seen[3] = true
			l.ValidForMs, ok = p.Int()
		case k == "signal" && !seen[4]:
			seen[4] = true
			l.Signal, ok = p.Str()
		case k == "reason" && !seen[5]:
			seen[5] = true
			l.Reason, ok = p.Str()
		}
		return ok
	})
	return l, ok
}

// knownStatuses lets a reply's status share the constant's string
// instead of allocating its own.
var knownStatuses = []lease.Status{lease.StatusActive, lease.StatusPausedWaiting, lease.StatusSuspectDead,
	lease.StatusExpired, lease.StatusReclaimed, lease.StatusRevoked, lease.StatusReleased}

func status(b []byte) lease.Status {
	for _, s := range knownStatuses {
		if string(b) == string(s) {
			return s
		}
	}
	return lease.Status(b)
}
