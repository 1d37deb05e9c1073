package api

import (
	"bytes"
	"strconv"
	"unicode/utf8"

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
	p := &cursor{b: body}
	if !p.lit('{') {
		return req, false
	}
	if !p.lit('}') {
		key, kok := p.raw()
		if !kok || string(key) != "leases" || !p.lit(':') {
			return req, false
		}
		if req.Leases, ok = parseList(p, (*cursor).held); !ok || !p.lit('}') {
			return HeartbeatRequest{}, false
		}
	}
	return req, p.end()
}

// ParseHeartbeatResponse parses the plain shape of a HeartbeatResponse
// (what the cluster sends); ok is false when body is not that shape.
func ParseHeartbeatResponse(body []byte) (resp HeartbeatResponse, ok bool) {
	if !utf8.Valid(body) {
		return resp, false
	}
	p := &cursor{b: body}
	if !p.lit('{') {
		return resp, false
	}
	if p.lit('}') {
		return resp, p.end()
	}
	var seenValid, seenLeases bool
	for {
		key, kok := p.raw()
		if !kok || !p.lit(':') {
			return HeartbeatResponse{}, false
		}
		switch {
		case string(key) == "validForMs" && !seenValid:
			seenValid = true
			if resp.ValidForMs, ok = p.int(); !ok {
				return HeartbeatResponse{}, false
			}
		case string(key) == "leases" && !seenLeases:
			seenLeases = true
			if resp.Leases, ok = parseList(p, (*cursor).leaseState); !ok {
				return HeartbeatResponse{}, false
			}
		default:
			return HeartbeatResponse{}, false
		}
		if p.lit('}') {
			return resp, p.end()
		}
		if !p.lit(',') {
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

func parseList[T any](p *cursor, elem func(*cursor) (T, bool)) ([]T, bool) {
	if p.peek('n') {
		if len(p.b)-p.i < 4 || string(p.b[p.i:p.i+4]) != "null" {
			return nil, false
		}
		p.i += 4
		return nil, true
	}
	if !p.lit('[') {
		return nil, false
	}
	// Sized once from the objects left in the body, not grown by
	// doubling: the leader parses a list per heartbeat, and growing one
	// of ten leases took five allocations. The count only guesses the
	// capacity (a brace inside a string adds one) and is capped, so a
	// body of braces cannot make the parser reserve more than that.
	out := make([]T, 0, min(bytes.Count(p.b[p.i:], openBrace), maxListHint))
	if p.lit(']') {
		return out, true
	}
	for {
		v, ok := elem(p)
		if !ok {
			return nil, false
		}
		out = append(out, v)
		if p.lit(']') {
			return out, true
		}
		if !p.lit(',') {
			return nil, false
		}
	}
}

// cursor is a position in a body; any method's false means "not the
// plain shape".
type cursor struct {
	b []byte
	i int
}

func (p *cursor) ws() { p.i = SkipJSONSpace(p.b, p.i) }

// SkipJSONSpace returns the index of the first byte at or after i in b
// that is not JSON whitespace.
func SkipJSONSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// end reports whether only whitespace is left.
func (p *cursor) end() bool {
	p.ws()
	return p.i == len(p.b)
}

// lit consumes c after optional whitespace.
func (p *cursor) lit(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// peek reports whether the next non-space byte is c, without consuming it.
func (p *cursor) peek(c byte) bool {
	p.ws()
	return p.i < len(p.b) && p.b[p.i] == c
}

// raw reads a string without escapes or control characters and returns
// its bytes in the body (no copy: keys are only compared).
func (p *cursor) raw() ([]byte, bool) {
	if !p.lit('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			b := p.b[start:p.i]
			p.i++
			return b, true
		case c == '\\' || c < 0x20:
			return nil, false
		}
		p.i++
	}
	return nil, false
}

// str is raw as a string of its own (for values that outlive the body).
func (p *cursor) str() (string, bool) {
	b, ok := p.raw()
	return string(b), ok
}

// digits reads a JSON integer's digits (no fraction or exponent after).
func (p *cursor) digits() ([]byte, bool) {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	d := p.b[start:p.i]
	if len(d) == 0 || (len(d) > 1 && d[0] == '0') {
		return nil, false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return nil, false
	}
	return d, true
}

// uint reads a JSON integer without sign that fits in a uint64.
func (p *cursor) uint() (uint64, bool) {
	p.ws()
	d, ok := p.digits()
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(string(d), 10, 64)
	return v, err == nil
}

// int reads a JSON integer, maybe negative, that fits in an int64.
func (p *cursor) int() (int64, bool) {
	p.ws()
	neg := p.i < len(p.b) && p.b[p.i] == '-'
	if neg {
		p.i++
	}
	d, ok := p.digits()
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(string(d), 10, 64)
	switch {
	case err != nil:
		return 0, false
	case neg && v <= 1<<63:
		return -int64(v), true // -1<<63 wraps to itself
	case !neg && v < 1<<63:
		return int64(v), true
	}
	return 0, false
}

// object reads one object whose keys are all known: field is called
// with each key (at most once each, the caller tracks that) and reads
// its value.
func (p *cursor) object(field func(key []byte) bool) bool {
	if !p.lit('{') {
		return false
	}
	if p.lit('}') {
		return true
	}
	for {
		key, ok := p.raw()
		if !ok || !p.lit(':') || !field(key) {
			return false
		}
		if p.lit('}') {
			return true
		}
		if !p.lit(',') {
			return false
		}
	}
}

// held reads one {"taskId":...,"epoch":...,"sinceProgressMs":...}.
func (p *cursor) held() (HeldLease, bool) {
	var h HeldLease
	var seen [3]bool
	ok := p.object(func(key []byte) bool {
		var ok bool
		switch k := string(key); {
		case k == "taskId" && !seen[0]:
			seen[0] = true
			h.TaskID, ok = p.str()
		case k == "epoch" && !seen[1]:
			seen[1] = true
			h.Epoch, ok = p.uint()
		case k == "sinceProgressMs" && !seen[2]:
			seen[2] = true
			h.SinceProgressMs, ok = p.uint()
		}
		return ok
	})
	return h, ok
}

// leaseState reads one LeaseState object.
func (p *cursor) leaseState() (LeaseState, bool) {
	var l LeaseState
	var seen [6]bool
	ok := p.object(func(key []byte) bool {
		var ok bool
		switch k := string(key); {
		case k == "taskId" && !seen[0]:
			seen[0] = true
			l.TaskID, ok = p.str()
		case k == "epoch" && !seen[1]:
			seen[1] = true
			l.Epoch, ok = p.uint()
		case k == "status" && !seen[2]:
			seen[2] = true
			var s []byte
			s, ok = p.raw()
			l.Status = status(s)
		case k == "validForMs" && !seen[3]:
			seen[3] = true
			l.ValidForMs, ok = p.int()
		case k == "signal" && !seen[4]:
			seen[4] = true
			l.Signal, ok = p.str()
		case k == "reason" && !seen[5]:
			seen[5] = true
			l.Reason, ok = p.str()
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
