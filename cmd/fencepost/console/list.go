package console

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fencepost/fencepost/fence/lease"
)

// listQuery is what the Tasks page asks for. State goes to the cluster
// (the API filters on it); Profile, Worker and Prefix are applied here, to
// pages the API returns in id order.
type listQuery struct {
	State   lease.TaskState
	Profile string
	Worker  string
	Prefix  string
	After   string
	Limit   int
}

// listPage is one page of the Tasks list. Next is the After of the next
// page ("" at the end); Partial means the scan budget ran out before the
// page filled, so Next is where the scan stopped.
type listPage struct {
	Tasks   []*lease.Task
	Next    string
	Scanned int
	Partial bool
}

// errBadQuery marks a filter the console refuses itself (400).
var errBadQuery = errors.New("bad filter")

// apiPage is the largest page the console asks the cluster for
// (raftstore.MaxListLimit).
const apiPage = 1000

// maxIDBytes bounds the id prefix (the cluster's default task id bound).
const maxIDBytes = 256

// validate refuses a prefix no task id can start with.
func (q *listQuery) validate() error {
	if q.Prefix != "" {
		if err := lease.CheckTaskID(q.Prefix, maxIDBytes); err != nil {
			return fmt.Errorf("%w: id prefix: %w", errBadQuery, err)
		}
	}
	if q.Limit <= 0 {
		q.Limit = DefaultPageSize
	}
	q.Limit = min(q.Limit, MaxPageSize)
	return nil
}

// beforePrefix returns the largest cursor every id with prefix p sorts
// after: p with its last byte lowered by one and '~' appended. '~' sorts
// after every character a task id may hold (lease.TaskIDAlphabet), so ids
// that start with the lowered prefix all sort before it, and the first id
// the cluster returns after it is the first one >= p.
func beforePrefix(p string) string {
	return p[:len(p)-1] + string(p[len(p)-1]-1) + "~"
}

// filtered reports whether the page needs filtering here.
func (q *listQuery) filtered() bool { return q.Profile != "" || q.Worker != "" || q.Prefix != "" }

func (q *listQuery) match(t *lease.Task) bool {
	if q.Profile != "" && t.Profile != q.Profile {
		return false
	}
	if q.Worker != "" && (t.Lease == nil || t.Lease.WorkerID != q.Worker) {
		return false
	}
	return strings.HasPrefix(t.ID, q.Prefix)
}

// listTasks fills one page from the cluster's paging: one API call when
// nothing is filtered here, else pages of apiPage until the page is full,
// the ids pass the prefix, the tasks end, or ScanBudget tasks were read.
func listTasks(ctx context.Context, cl Cluster, q listQuery) (listPage, error) {
	if err := q.validate(); err != nil {
		return listPage{}, err
	}
	cursor := q.After
	if q.Prefix != "" && cursor < q.Prefix {
		cursor = beforePrefix(q.Prefix)
	}
	var out listPage
	for {
		limit := q.Limit - len(out.Tasks)
		if q.filtered() {
			limit = apiPage
		}
		page, err := cl.Tasks(ctx, lease.TaskFilter{State: q.State, After: cursor, Limit: limit}, false)
		if err != nil {
			return out, err
		}
		out.Scanned += len(page.Tasks)
		for _, t := range page.Tasks {
			cursor = t.ID
			if q.Prefix != "" && t.ID > q.Prefix && !strings.HasPrefix(t.ID, q.Prefix) {
				return out, nil // past every id with the prefix
			}
			if !q.match(t) {
				continue
			}
			out.Tasks = append(out.Tasks, t)
			if len(out.Tasks) == q.Limit {
				out.Next = t.ID
				return out, nil
			}
		}
		if page.Next == "" || len(page.Tasks) == 0 {
			return out, nil
		}
		if out.Scanned >= ScanBudget {
			out.Next, out.Partial = cursor, true
			return out, nil
		}
	}
}
