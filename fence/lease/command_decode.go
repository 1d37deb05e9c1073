package lease

import (
	"encoding/json"
	"math"
	"time"
	"unicode/utf8"

	"github.com/fencepost/fencepost/fence/jsonscan"
)

// DecodeCommand decodes a command as it is carried in a raft entry,
// giving exactly what json.Unmarshal gives.
//
// Every member decodes every command it applies, so encoding/json's
// reflection was a fixed share of each member's CPU per write (about 7 %
// of the leader's under 64 concurrent checkpoints). The entries are
// written by json.Marshal (AppendCommand), whose output is narrow: keys as
// tagged, strings without escapes unless a character needs one, numbers
// as integers. The fast path reads that shape (jsonscan), and the moment
// it meets anything else (an escape, a key it does not know, a nested
// effect, a null, an overflow, bytes that are not UTF-8) it gives up and
// the command is decoded again by json.Unmarshal from scratch, so an
// entry written by any build, or not by json.Marshal at all, decodes as
// it always did (TestDecodeCommandMatchesJSON, FuzzDecodeCommand).
func DecodeCommand(data []byte, c *Command) error {
	*c = Command{}
	if utf8.Valid(data) && decodeCommandFast(jsonscan.New(data), c) {
		return nil
	}
	*c = Command{}
	return json.Unmarshal(data, c)
}

func decodeCommandFast(p *jsonscan.Cursor, c *Command) bool {
	return p.Object(func(key []byte) bool { return commandField(p, key, c) }) && p.End()
}

// commandField reads the value of key into c. A key that repeats is read
// again, the later value winning, as json.Unmarshal does.
func commandField(p *jsonscan.Cursor, key []byte, c *Command) bool {
	var ok bool
	switch string(key) { // no copy: the compiler compares the bytes
	case "op":
		var v uint64
		if v, ok = p.Uint(); ok && v <= math.MaxUint8 {
			c.Op = Op(v)
		} else {
			ok = false
		}
	case "rid":
		c.RequestID, ok = p.Str()
	case "t":
		var tok []byte
		if tok, ok = p.Token(); ok {
			ok = c.Time.UnmarshalJSON(tok) == nil
		}
	case "task":
		c.TaskID, ok = p.Str()
	case "session":
		c.SessionID, ok = p.Str()
	case "worker":
		c.WorkerID, ok = p.Str()
	case "lease":
		c.LeaseID, ok = p.Str()
	case "owner":
		c.Owner, ok = p.Str()
	case "quota":
		// A second "quota" fills the first one's struct, as json.Unmarshal
		// does through a pointer already set.
		if c.Quota == nil {
			c.Quota = &Quota{}
		}
		ok = p.Object(func(k []byte) bool { return quotaField(p, k, c.Quota) })
	case "epoch":
		c.Epoch, ok = p.Uint()
	case "create":
		c.Create, ok = p.Bool()
	case "profile":
		c.Profile, ok = p.Str()
	case "ttl":
		var v int64
		v, ok = p.Int()
		c.TTL = time.Duration(v)
	case "hb":
		var v int64
		v, ok = p.Int()
		c.Heartbeat = time.Duration(v)
	case "prio":
		c.Priority, ok = p.IntOf()
	case "payload":
		c.Payload, ok = p.Base64()
	case "seq":
		c.Seq, ok = p.Uint()
	case "step":
		c.Step, ok = p.Str()
	case "seqWin":
		c.SeqWindow, ok = p.Uint()
	case "data":
		c.Data, ok = p.Base64()
	case "deadline":
		var tok []byte
		if tok, ok = p.Token(); ok {
			ok = c.Deadline.UnmarshalJSON(tok) == nil
		}
	case "outcome":
		var s string
		s, ok = p.Str()
		c.Outcome = Outcome(s)
	case "result":
		c.Result, ok = p.Base64()
	case "reason":
		c.Reason, ok = p.Str()
	}
	return ok // a key not above (the effect, one from a later build): false
}

func quotaField(p *jsonscan.Cursor, key []byte, q *Quota) bool {
	var ok bool
	switch string(key) {
	case "s":
		q.Sessions, ok = p.IntOf()
	case "t":
		q.Tasks, ok = p.IntOf()
	case "b":
		q.Bytes, ok = p.Int()
	case "tb":
		q.TotalBytes, ok = p.Int()
	}
	return ok
}
