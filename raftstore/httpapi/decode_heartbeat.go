package httpapi

import (
	"strconv"
	"unicode/utf8"

	"github.com/fencepost/fencepost/fence/api"
)

// decodeHeartbeat decodes a heartbeat body exactly as decodeBody would.
// Every sidecar sends one per interval naming each lease it holds, and
// encoding/json's reflection was the largest single cost of the leader's
// heartbeat path, so the plain shape clients send ({"leases":[{"taskId":
// "...","epoch":N,"sinceProgressMs":N},...]}, any JSON whitespace, keys in any order) is parsed
// by hand. Anything else — escapes in strings, other or repeated keys,
// numbers that are not plain unsigned integers, trailing data — goes to
// decodeBody, which decides and words the error; the fast path never
// accepts what decodeBody would refuse (FuzzDecodeHeartbeat holds it to
// that, result for result).
func decodeHeartbeat(body []byte, req *api.HeartbeatRequest) error {
	if r, ok := parseHeartbeat(body); ok {
		*req = r
		return nil
	}
	return decodeBody(body, req)
}

// hbParser is a cursor over a heartbeat body; any method's false means
// "not the plain shape".
type hbParser struct {
	b []byte
	i int
}

func (p *hbParser) ws() { p.i = skipWS(p.b, p.i) }

// skipWS returns the index of the first byte at or after i in b that is
// not JSON whitespace.
func skipWS(b []byte, i int) int {
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

// lit consumes c after optional whitespace.
func (p *hbParser) lit(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// peek reports whether the next non-space byte is c, without consuming it.
func (p *hbParser) peek(c byte) bool {
	p.ws()
	return p.i < len(p.b) && p.b[p.i] == c
}

// raw reads a string without escapes or control characters and returns
// its bytes in the body (no copy: keys are only compared).
func (p *hbParser) raw() ([]byte, bool) {
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
func (p *hbParser) str() (string, bool) {
	b, ok := p.raw()
	return string(b), ok
}

// uint reads a JSON integer without sign, fraction or exponent that fits
// in a uint64.
func (p *hbParser) uint() (uint64, bool) {
	p.ws()
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	digits := p.b[start:p.i]
	if len(digits) == 0 || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, false
	}
	v, err := strconv.ParseUint(string(digits), 10, 64)
	return v, err == nil
}

// held reads one {"taskId":...,"epoch":...,"sinceProgressMs":...} object.
func (p *hbParser) held() (api.HeldLease, bool) {
	var h api.HeldLease
	if !p.lit('{') {
		return h, false
	}
	if p.lit('}') {
		return h, true
	}
	var seenTask, seenEpoch, seenProgress, ok bool
	for {
		key, kok := p.raw()
		if !kok || !p.lit(':') {
			return h, false
		}
		switch {
		case string(key) == "taskId" && !seenTask:
			seenTask = true
			if h.TaskID, ok = p.str(); !ok {
				return h, false
			}
		case string(key) == "epoch" && !seenEpoch:
			seenEpoch = true
			if h.Epoch, ok = p.uint(); !ok {
				return h, false
			}
		case string(key) == "sinceProgressMs" && !seenProgress:
			seenProgress = true
			if h.SinceProgressMs, ok = p.uint(); !ok {
				return h, false
			}
		default:
			return h, false
		}
		if p.lit('}') {
			return h, true
		}
		if !p.lit(',') {
			return h, false
		}
	}
}

// parseHeartbeat is the fast path; ok is false when body is not the plain
// shape (which says nothing about whether it is valid).
func parseHeartbeat(body []byte) (req api.HeartbeatRequest, ok bool) {
	if !utf8.Valid(body) {
		return req, false
	}
	p := &hbParser{b: body}
	if !p.lit('{') {
		return req, false
	}
	if !p.lit('}') {
		key, kok := p.raw()
		if !kok || string(key) != "leases" || !p.lit(':') {
			return req, false
		}
		switch {
		case p.peek('n'):
			if len(p.b)-p.i < 4 || string(p.b[p.i:p.i+4]) != "null" {
				return req, false
			}
			p.i += 4
		case p.lit('['):
			req.Leases = []api.HeldLease{}
			if !p.lit(']') {
				for {
					h, hok := p.held()
					if !hok {
						return api.HeartbeatRequest{}, false
					}
					req.Leases = append(req.Leases, h)
					if p.lit(']') {
						break
					}
					if !p.lit(',') {
						return api.HeartbeatRequest{}, false
					}
				}
			}
		default:
			return req, false
		}
		if !p.lit('}') {
			return api.HeartbeatRequest{}, false
		}
	}
	p.ws()
	if p.i != len(p.b) {
		return api.HeartbeatRequest{}, false
	}
	return req, true
}
