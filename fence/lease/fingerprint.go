package lease

import (
	"encoding/binary"
	"hash/fnv"
)

// fingerprint digests what a command asks for, so a request id reused for a
// different command can be told from a retry of the same one. It leaves out
// what the leader stamps anew on every attempt (time, deadlines derived
// from it, lease ids, the profile's TTL and heartbeat) and the request id
// itself. 0 is reserved for "not recorded" (records restored from a
// snapshot written before fingerprints existed).
func (c *Command) fingerprint() uint64 {
	h := fnv.New64a()
	var n [8]byte
	num := func(v uint64) {
		binary.LittleEndian.PutUint64(n[:], v)
		_, _ = h.Write(n[:])
	}
	str := func(s string) {
		num(uint64(len(s)))
		_, _ = h.Write([]byte(s))
	}
	bytes := func(b []byte) {
		num(uint64(len(b)))
		_, _ = h.Write(b)
	}
	num(uint64(c.Op))
	str(c.TaskID)
	str(c.SessionID)
	str(c.WorkerID)
	str(c.Owner)
	num(c.Epoch)
	if c.Create {
		num(1)
	} else {
		num(0)
	}
	str(c.Profile)
	num(uint64(int64(c.Priority)))
	bytes(c.Payload)
	num(c.Seq)
	str(c.Step)
	bytes(c.Data)
	str(string(c.Outcome))
	bytes(c.Result)
	str(c.Reason)
	if e := c.Effect; e != nil {
		str(e.Key)
		str(e.Method)
		str(e.URL)
		str(e.BodyDigest)
		num(uint64(int64(e.Status)))
		bytes(e.Body)
	}
	if v := h.Sum64(); v != 0 {
		return v
	}
	return 1
}
