package lease

import "container/heap"

// claimQueue orders claimable tasks: higher priority first, then the one
// claimable longest, then the smaller id, so claims are deterministic on
// every replica.
//
// The heap moves qslots, not tasks: a task only points at its slot, so
// reordering the heap never writes to a task. Tasks a snapshot view still
// reads (view.go) must not be written, and the heap reorders tasks other
// than the one an Apply changes.
type claimQueue struct{ items []*qslot }

// qslot is a queued task's place in the heap.
type qslot struct {
	t   *Task
	idx int
}

func (q *claimQueue) Len() int { return len(q.items) }

func (q *claimQueue) Less(i, j int) bool {
	a, b := q.items[i].t, q.items[j].t
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if a.ClaimableAt != b.ClaimableAt {
		return a.ClaimableAt.Before(b.ClaimableAt)
	}
	return a.ID < b.ID
}

func (q *claimQueue) Swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].idx, q.items[j].idx = i, j
}

func (q *claimQueue) Push(x any) {
	s := x.(*qslot)
	s.idx = len(q.items)
	q.items = append(q.items, s)
}

func (q *claimQueue) Pop() any {
	n := len(q.items) - 1
	s := q.items[n]
	q.items[n] = nil
	q.items = q.items[:n]
	s.idx = -1
	return s
}

// push queues t, or moves it to its new place if it is queued already.
func (q *claimQueue) push(t *Task) {
	if s := t.q; s != nil {
		heap.Fix(q, s.idx)
		return
	}
	t.q = &qslot{t: t}
	heap.Push(q, t.q)
}

// remove takes t out of the queue, if it is queued.
func (q *claimQueue) remove(t *Task) {
	if s := t.q; s != nil {
		heap.Remove(q, s.idx)
		t.q = nil
	}
}

func (q *claimQueue) peek() *Task {
	if len(q.items) == 0 {
		return nil
	}
	return q.items[0].t
}
