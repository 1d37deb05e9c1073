package lease

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"time"
	"unicode/utf8"
)

// DecodeCommand decodes a command as it is carried in a raft entry,
// giving exactly what json.Unmarshal gives.
//
// Every member decodes every command it applies, so encoding/json's
// reflection was a fixed share of each member's CPU per write (about 7 %
// of the leader's under 64 concurrent checkpoints). The entries are
// written by json.Marshal, whose output is narrow: no whitespace, keys as
// tagged, strings without escapes unless a character needs one, numbers as
// integers. The fast path reads that form only, and the moment it meets
// anything else (an escape, a key it does not know, a nested effect, a
// null, an overflow) it gives up and the command is decoded again by
// json.Unmarshal from scratch, so an entry written by any build, or not
// by json.Marshal at all, decodes as it always did
// (TestDecodeCommandMatchesJSON, FuzzDecodeCommand).
func DecodeCommand(data []byte, c *Command) error {
	*c = Command{}
	if decodeCommandFast(data, c) {
		return nil
	}
	*c = Command{}
	return json.Unmarshal(data, c)
}

// cmdReader reads the compact JSON form; every method reports false on
// anything outside it.
type cmdReader struct {
	b []byte
	i int
}

func (r *cmdReader) next(ch byte) bool {
	if r.i < len(r.b) && r.b[r.i] == ch {
		r.i++
		return true
	}
	return false
}

// raw returns a string token, quotes included, that needs no unescaping
// and is valid UTF-8 (json.Unmarshal would replace invalid bytes).
func (r *cmdReader) raw() ([]byte, bool) {
	start := r.i
	if !r.next('"') {
		return nil, false
	}
	ascii := true
	for ; r.i < len(r.b); r.i++ {
		switch ch := r.b[r.i]; {
		case ch == '"':
			r.i++
			tok := r.b[start:r.i]
			return tok, ascii || utf8.Valid(tok)
		case ch == '\\' || ch < 0x20:
			return nil, false
		case ch >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

func (r *cmdReader) str() (string, bool) {
	tok, ok := r.raw()
	if !ok {
		return "", false
	}
	return string(tok[1 : len(tok)-1]), true
}

// bytes decodes a base64 string as json.Unmarshal does for a []byte.
func (r *cmdReader) bytes() ([]byte, bool) {
	tok, ok := r.raw()
	if !ok {
		return nil, false
	}
	s := tok[1 : len(tok)-1]
	b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(b, s)
	return b[:n], err == nil
}

// digits reads an unsigned integer in JSON's grammar (no leading zero).
func (r *cmdReader) digits() (uint64, bool) {
	start := r.i
	var v uint64
	for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
		d := uint64(r.b[r.i] - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
		r.i++
	}
	n := r.i - start
	if n == 0 || (n > 1 && r.b[start] == '0') {
		return 0, false
	}
	// A fraction or an exponent is json.Unmarshal's to refuse or not.
	if r.i < len(r.b) && (r.b[r.i] == '.' || r.b[r.i] == 'e' || r.b[r.i] == 'E') {
		return 0, false
	}
	return v, true
}

func (r *cmdReader) uint64() (uint64, bool) { return r.digits() }

func (r *cmdReader) int64() (int64, bool) {
	neg := r.next('-')
	v, ok := r.digits()
	switch {
	case !ok:
		return 0, false
	case neg && v <= 1<<63:
		return int64(-v), true // -(1<<63) wraps to itself: MinInt64
	case !neg && v <= math.MaxInt64:
		return int64(v), true
	}
	return 0, false
}

// int reads an int, refusing what does not fit one (as json.Unmarshal
// does on a 32-bit build).
func (r *cmdReader) int() (int, bool) {
	v, ok := r.int64()
	return int(v), ok && int64(int(v)) == v
}

func (r *cmdReader) bool() (bool, bool) {
	for _, lit := range [...]string{"true", "false"} {
		if len(r.b)-r.i >= len(lit) && string(r.b[r.i:r.i+len(lit)]) == lit {
			r.i += len(lit)
			return lit == "true", true
		}
	}
	return false, false
}

// object reads {"key":value,...}, handing each key to field.
func (r *cmdReader) object(field func(key []byte) bool) bool {
	if !r.next('{') {
		return false
	}
	if r.next('}') {
		return true
	}
	for {
		tok, ok := r.raw()
		if !ok || !r.next(':') || !field(tok[1:len(tok)-1]) {
			return false
		}
		if r.next('}') {
			return true
		}
		if !r.next(',') {
			return false
		}
	}
}

func decodeCommandFast(data []byte, c *Command) bool {
	r := &cmdReader{b: data}
	return r.object(func(key []byte) bool { return r.commandField(key, c) }) && r.i == len(r.b)
}

func (r *cmdReader) commandField(key []byte, c *Command) bool {
	var ok bool
	switch string(key) { // no copy: the compiler compares the bytes
	case "op":
		var v uint64
		if v, ok = r.uint64(); ok && v <= math.MaxUint8 {
			c.Op = Op(v)
		} else {
			ok = false
		}
	case "rid":
		c.RequestID, ok = r.str()
	case "t":
		var tok []byte
		if tok, ok = r.raw(); ok {
			ok = c.Time.UnmarshalJSON(tok) == nil
		}
	case "task":
		c.TaskID, ok = r.str()
	case "session":
		c.SessionID, ok = r.str()
	case "worker":
		c.WorkerID, ok = r.str()
	case "lease":
		c.LeaseID, ok = r.str()
	case "owner":
		c.Owner, ok = r.str()
	case "quota":
		// A second "quota" fills the first one's struct, as json.Unmarshal
		// does through a pointer already set.
		if c.Quota == nil {
			c.Quota = &Quota{}
		}
		ok = r.object(func(k []byte) bool { return r.quotaField(k, c.Quota) })
	case "epoch":
		c.Epoch, ok = r.uint64()
	case "create":
		c.Create, ok = r.bool()
	case "profile":
		c.Profile, ok = r.str()
	case "ttl":
		var v int64
		v, ok = r.int64()
		c.TTL = time.Duration(v)
	case "hb":
		var v int64
		v, ok = r.int64()
		c.Heartbeat = time.Duration(v)
	case "prio":
		c.Priority, ok = r.int()
	case "payload":
		c.Payload, ok = r.bytes()
	case "seq":
		c.Seq, ok = r.uint64()
	case "step":
		c.Step, ok = r.str()
	case "seqWin":
		c.SeqWindow, ok = r.uint64()
	case "data":
		c.Data, ok = r.bytes()
	case "deadline":
		var tok []byte
		if tok, ok = r.raw(); ok {
			ok = c.Deadline.UnmarshalJSON(tok) == nil
		}
	case "outcome":
		var s string
		s, ok = r.str()
		c.Outcome = Outcome(s)
	case "result":
		c.Result, ok = r.bytes()
	case "reason":
		c.Reason, ok = r.str()
	}
	return ok // a key not above (the effect, one from a later build): false
}

func (r *cmdReader) quotaField(key []byte, q *Quota) bool {
	var ok bool
	switch string(key) {
	case "s":
		q.Sessions, ok = r.int()
	case "t":
		q.Tasks, ok = r.int()
	case "b":
		q.Bytes, ok = r.int64()
	case "tb":
		q.TotalBytes, ok = r.int64()
	}
	return ok
}
