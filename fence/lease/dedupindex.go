package lease

import (
	"hash/maphash"
	"math/bits"
)

// idIndex finds the record of a remembered request id in a dedupLog. It
// takes the place of a map[string]uint64, whose 24-byte slots (the id's
// string header and the sequence number) cost about 56 bytes per id at Go
// maps' load: here a slot is 4 bytes, at most half the slots are used,
// and the id itself is read from the record it points at.
//
// It is an open-addressing table with linear probing on a hash of the id
// (maphash, seeded per log: lookups do not depend on the seed, so the
// model stays deterministic). A slot holds seqCode(seq), never 0, and 0 is
// an empty slot. A lookup compares the record's id, so two ids of one hash
// never confuse each other. Removal shifts the following run back
// (no tombstones), so probes stay short however many ids come and go.
type idIndex struct {
	seed  maphash.Seed
	slots []uint32
	n     int
}

// seqMod is the modulus of the sequence numbers slots hold: seqCode(s) is
// s mod seqMod, plus 1, so it is never 0. A log holds fewer records than
// seqMod, so a slot and the log's base give back the whole number.
const seqMod = 1<<32 - 1

func seqCode(seq uint64) uint32 { return uint32(seq%seqMod) + 1 }

// seqOf returns the sequence number of slot value v in a log whose oldest
// record is base.
func seqOf(v uint32, base uint64) uint64 {
	return base + (uint64(v-1)+seqMod-base%seqMod)%seqMod
}

// minSlots is the smallest table; it never shrinks below it.
const minSlots = 16

func newIDIndex() idIndex { return idIndex{seed: maphash.MakeSeed()} }

func (x *idIndex) home(id string) int {
	return int(maphash.String(x.seed, id) & uint64(len(x.slots)-1))
}

// find returns the slot holding id's record in d, or -1.
func (x *idIndex) find(d *dedupLog, id string) int {
	if len(x.slots) == 0 {
		return -1
	}
	mask := len(x.slots) - 1
	for i := x.home(id); ; i = (i + 1) & mask {
		v := x.slots[i]
		if v == 0 {
			return -1
		}
		if d.recs[seqOf(v, d.base)-d.base].id == id {
			return i
		}
	}
}

// insert adds the record at seq of id, which must not be in the index;
// d.recs must hold it.
func (x *idIndex) insert(d *dedupLog, id string, seq uint64) {
	if 2*(x.n+1) > len(x.slots) {
		x.resize(d, max(minSlots, 2*len(x.slots)))
	}
	x.put(id, seqCode(seq))
	x.n++
}

func (x *idIndex) put(id string, v uint32) {
	mask := len(x.slots) - 1
	i := x.home(id)
	for x.slots[i] != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = v
}

// remove drops the record at seq of id from the index; d.recs must still
// hold the records the index points at.
func (x *idIndex) remove(d *dedupLog, id string, seq uint64) {
	mask := len(x.slots) - 1
	want := seqCode(seq)
	i := x.home(id)
	for x.slots[i] != want {
		if x.slots[i] == 0 {
			return // not indexed
		}
		i = (i + 1) & mask
	}
	// Backward shift: move up every later slot of the run whose home is
	// not in (i, j], so no probe for it crosses the emptied slot.
	for j := (i + 1) & mask; x.slots[j] != 0; j = (j + 1) & mask {
		h := x.home(d.recs[seqOf(x.slots[j], d.base)-d.base].id)
		if (j-h)&mask >= (j-i)&mask {
			x.slots[i] = x.slots[j]
			i = j
		}
	}
	x.slots[i] = 0
	x.n--
}

// shrink makes the table smaller once it is mostly empty (after a burst
// of ids has aged out), so an idle model gives the memory back.
func (x *idIndex) shrink(d *dedupLog) {
	if len(x.slots) > minSlots && 8*x.n < len(x.slots) {
		x.resize(d, max(minSlots, 1<<bits.Len(uint(4*x.n))))
	}
}

// resize rebuilds the index with n slots (a power of two) from the
// records of d it holds.
func (x *idIndex) resize(d *dedupLog, n int) {
	old := x.slots
	x.slots = make([]uint32, n)
	for _, v := range old {
		if v != 0 {
			x.put(d.recs[seqOf(v, d.base)-d.base].id, v)
		}
	}
}
