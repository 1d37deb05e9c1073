package lease

import "container/heap"

// claimQueue orders claimable tasks: higher priority first, then the one
// claimable longest, then the smaller id, so claims are deterministic on
// every replica.
type claimQueue struct{ items []*Task }

func (q *claimQueue) Len() int { return len(q.items) }

func (q *claimQueue) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if !a.ClaimableAt.Equal(b.ClaimableAt) {
		return a.ClaimableAt.Before(b.ClaimableAt)
	}
	return a.ID < b.ID
}

func (q *claimQueue) Swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].qidx, q.items[j].qidx = i, j
}

func (q *claimQueue) Push(x any) {
	t := x.(*Task)
	t.qidx = len(q.items)
	q.items = append(q.items, t)
}

func (q *claimQueue) Pop() any {
	n := len(q.items) - 1
	t := q.items[n]
	q.items[n] = nil
	q.items = q.items[:n]
	t.qidx = -1
	return t
}

func (q *claimQueue) push(t *Task) {
	if t.qidx >= 0 && t.qidx < len(q.items) && q.items[t.qidx] == t {
		heap.Fix(q, t.qidx)
		return
	}
	heap.Push(q, t)
}

func (q *claimQueue) remove(t *Task) {
	if t.qidx >= 0 && t.qidx < len(q.items) && q.items[t.qidx] == t {
		heap.Remove(q, t.qidx)
	}
	t.qidx = -1
}

func (q *claimQueue) peek() *Task {
	if len(q.items) == 0 {
		return nil
	}
	return q.items[0]
}
