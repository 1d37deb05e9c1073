package lease

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
)

// AppendCommand appends c as json.Marshal writes it, byte for byte, and
// returns the extended buffer.
//
// The leader encodes every command it proposes; encoding/json's
// reflection was about 3 % of its CPU under 64 concurrent checkpoints.
// The fast path writes the fields in the struct's order with its
// omitempty rules; a string with anything but printable ASCII that
// json.Marshal writes as it is (a quote, a backslash, a control character,
// <, > and &, which it escapes for HTML, but also any non-ASCII text,
// which it mostly does not: checking for that is not worth it) or an
// effect sends the whole command to json.Marshal instead
// (TestAppendCommandWritesWhatMarshalWrites).
func AppendCommand(dst []byte, c *Command) ([]byte, error) {
	if b, ok := appendCommandFast(dst, c); ok {
		return b, nil
	}
	out, err := json.Marshal(c)
	if err != nil {
		return dst, err
	}
	return append(dst, out...), nil
}

// plainString reports whether json.Marshal writes s between quotes as it
// is.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch < 0x20 || ch >= 0x7f, ch == '"', ch == '\\', ch == '<', ch == '>', ch == '&':
			return false
		}
	}
	return true
}

// cmdWriter appends fields, remembering whether one did not fit the fast
// path.
type cmdWriter struct {
	b   []byte
	bad bool
}

func (w *cmdWriter) key(k string) {
	w.b = append(w.b, ',', '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

func (w *cmdWriter) str(k, v string) {
	if v == "" {
		return
	}
	if !plainString(v) {
		w.bad = true
		return
	}
	w.key(k)
	w.b = append(w.b, '"')
	w.b = append(w.b, v...)
	w.b = append(w.b, '"')
}

func (w *cmdWriter) uint(k string, v uint64) {
	if v != 0 {
		w.key(k)
		w.b = strconv.AppendUint(w.b, v, 10)
	}
}

func (w *cmdWriter) int(k string, v int64) {
	if v != 0 {
		w.key(k)
		w.b = strconv.AppendInt(w.b, v, 10)
	}
}

func (w *cmdWriter) bytes(k string, v []byte) {
	if len(v) != 0 {
		w.key(k)
		w.b = append(w.b, '"')
		w.b = base64.StdEncoding.AppendEncode(w.b, v)
		w.b = append(w.b, '"')
	}
}

func appendCommandFast(dst []byte, c *Command) ([]byte, bool) {
	if c.Effect != nil {
		return dst, false
	}
	t, err := c.Time.MarshalJSON()
	if err != nil {
		return dst, false // json.Marshal reports it
	}
	w := cmdWriter{b: append(dst, `{"op":`...)}
	w.b = strconv.AppendUint(w.b, uint64(c.Op), 10)
	w.str("rid", c.RequestID)
	w.key("t")
	w.b = append(w.b, t...)
	w.str("task", c.TaskID)
	w.str("session", c.SessionID)
	w.str("worker", c.WorkerID)
	w.str("lease", c.LeaseID)
	w.str("owner", c.Owner)
	if q := c.Quota; q != nil {
		w.key("quota")
		n := len(w.b)
		w.int("s", int64(q.Sessions))
		w.int("t", int64(q.Tasks))
		w.int("b", q.Bytes)
		w.int("tb", q.TotalBytes)
		if len(w.b) == n {
			w.b = append(w.b, "{}"...)
		} else {
			w.b[n] = '{' // the first member's comma
			w.b = append(w.b, '}')
		}
	}
	w.uint("epoch", c.Epoch)
	if c.Create {
		w.key("create")
		w.b = append(w.b, "true"...)
	}
	w.str("profile", c.Profile)
	w.int("ttl", int64(c.TTL))
	w.int("hb", int64(c.Heartbeat))
	w.int("prio", int64(c.Priority))
	w.bytes("payload", c.Payload)
	w.uint("seq", c.Seq)
	w.str("step", c.Step)
	w.uint("seqWin", c.SeqWindow)
	w.bytes("data", c.Data)
	if !c.Deadline.IsZero() {
		w.key("deadline")
		w.b = c.Deadline.AppendJSON(w.b)
	}
	w.str("outcome", string(c.Outcome))
	w.bytes("result", c.Result)
	w.str("reason", c.Reason)
	if w.bad {
		return dst, false
	}
	return append(w.b, '}'), true
}
