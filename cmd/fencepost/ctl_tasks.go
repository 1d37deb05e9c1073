package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/cluster"
)

// Task states and lease statuses accepted by 'tasks list', checked here so
// a typo is a usage error rather than an empty list.
var (
	ctlTaskStates = []lease.TaskState{
		lease.TaskPending, lease.TaskLeased, lease.TaskWaiting,
		lease.TaskCompleted, lease.TaskFailed, lease.TaskCancelled,
	}
	ctlLeaseStatuses = []lease.Status{
		lease.StatusActive, lease.StatusPausedWaiting, lease.StatusSuspectDead, lease.StatusExpired,
		lease.StatusReclaimed, lease.StatusRevoked, lease.StatusReleased,
	}
)

var ctlTasksList = &ctlCmd{
	name:     "tasks list",
	synopsis: "[--state S] [--status S] [--limit N] [--after ID] [--stale]",
	summary:  "list tasks, by state or by their lease's status",
	bind: func(fs *flag.FlagSet) ctlAction {
		state := fs.String("state", "", "only tasks in this state: pending, leased, waiting, completed, failed, cancelled")
		status := fs.String("status", "", "only tasks whose current lease has this status: active, suspect_dead, expired, ...")
		limit := fs.Int("limit", 0, "at most this many tasks (0: the cluster's page size)")
		after := fs.String("after", "", "start after this task id (the next page)")
		stale := fs.Bool("stale", false, "read the answering member's replica, skipping the linearizable round")
		return func(x *ctlCall) (*ctlOut, error) {
			f := lease.TaskFilter{State: lease.TaskState(*state), Status: lease.Status(*status), After: *after, Limit: *limit}
			if f.State != "" && !slices.Contains(ctlTaskStates, f.State) {
				return nil, usagef("--state %q: want one of %v", *state, ctlTaskStates)
			}
			if f.Status != "" && !slices.Contains(ctlLeaseStatuses, f.Status) {
				return nil, usagef("--status %q: want one of %v", *status, ctlLeaseStatuses)
			}
			if f.Limit < 0 {
				return nil, usagef("--limit must not be negative")
			}
			var list api.TaskList
			var err error
			if x.shards != nil {
				list, err = tasksAcross(x.ctx, x.shards, f, *stale)
			} else {
				list, err = x.client.Tasks(x.ctx, f, *stale)
			}
			if err != nil {
				return nil, err
			}
			if list.Tasks == nil {
				list.Tasks = []*lease.Task{} // "tasks": [] rather than null for jq
			}
			return &ctlOut{v: list, table: func(w io.Writer) { taskTable(w, list.Tasks, list.Next) }}, nil
		}
	},
}

var ctlTasksGet = &ctlCmd{
	name:     "tasks get",
	args:     []string{"ID"},
	synopsis: "[--stale]",
	summary:  "show one task: state, lease, checkpoint, history",
	bind: func(fs *flag.FlagSet) ctlAction {
		stale := fs.Bool("stale", false, "read the answering member's replica, skipping the linearizable round")
		return func(x *ctlCall) (*ctlOut, error) {
			t, err := x.client.Task(x.ctx, x.args[0], *stale)
			if err != nil {
				return nil, err
			}
			return taskOut(t), nil
		}
	},
}

var ctlTasksCreate = &ctlCmd{
	name:     "tasks create",
	args:     []string{"ID"},
	synopsis: "[--profile P] [--priority N] [--payload STR]",
	summary:  "create a pending task",
	bind: func(fs *flag.FlagSet) ctlAction {
		profile := fs.String("profile", "", "lease profile (TTL and heartbeat); empty: the cluster's default")
		priority := fs.Int("priority", 0, "higher is claimed first")
		payload := fs.String("payload", "", "opaque input handed to every owner")
		return func(x *ctlCall) (*ctlOut, error) {
			t, err := x.client.CreateTask(x.ridCtx(""), api.CreateTaskRequest{
				TaskID: x.args[0], Profile: *profile, Priority: *priority, Payload: optBytes(*payload),
			})
			if err != nil {
				return nil, err
			}
			return taskOut(t), nil
		}
	},
}

var ctlTasksSignal = &ctlCmd{
	name:     "tasks signal",
	args:     []string{"ID"},
	synopsis: "[--payload STR] [--reason R]",
	summary:  "wake a waiting task; it becomes claimable",
	bind: func(fs *flag.FlagSet) ctlAction {
		payload := fs.String("payload", "", "handed to the next owner (the human's answer, say)")
		reason := fs.String("reason", "", "why, for the task's record")
		return func(x *ctlCall) (*ctlOut, error) {
			t, err := x.client.Signal(x.ridCtx(""), x.args[0], api.SignalRequest{Payload: optBytes(*payload), Reason: *reason})
			if err != nil {
				return nil, err
			}
			return taskOut(t), nil
		}
	},
}

var ctlTasksRevoke = &ctlCmd{
	name:     "tasks revoke",
	args:     []string{"ID"},
	synopsis: "[--epoch N] [--reason R]",
	summary:  "take the task's lease away; the holder's sidecar blocks its writes",
	bind: func(fs *flag.FlagSet) ctlAction {
		epoch := fs.Uint64("epoch", 0, "revoke only if this epoch is current (0: whatever lease is live)")
		reason := fs.String("reason", "", "why, shown to the holder")
		return func(x *ctlCall) (*ctlOut, error) {
			t, err := x.client.Revoke(x.ridCtx(""), x.args[0], api.RevokeRequest{Epoch: *epoch, Reason: *reason})
			if err != nil {
				return nil, err
			}
			return taskOut(t), nil
		}
	},
}

var ctlTasksCancel = &ctlCmd{
	name:     "tasks cancel",
	args:     []string{"ID"},
	synopsis: "[--reason R]",
	summary:  "cancel the task for good",
	bind: func(fs *flag.FlagSet) ctlAction {
		reason := fs.String("reason", "", "why, for the task's record")
		return func(x *ctlCall) (*ctlOut, error) {
			t, err := x.client.Cancel(x.ridCtx(""), x.args[0], api.CancelRequest{Reason: *reason})
			if err != nil {
				return nil, err
			}
			return taskOut(t), nil
		}
	},
}

var ctlTasksDelete = &ctlCmd{
	name:    "tasks delete",
	args:    []string{"ID"},
	summary: "delete a completed, failed or cancelled task (its epochs are never reused)",
	bind: func(*flag.FlagSet) ctlAction {
		return func(x *ctlCall) (*ctlOut, error) {
			err := x.client.DeleteTask(x.ridCtx(""), x.args[0])
			var ce *cluster.Error
			if errors.Is(err, lease.ErrInvalid) && errors.As(err, &ce) {
				// The cluster calls deleting a live task an invalid
				// command (400); for a script it is the task's state that
				// is in the way, as for every other conflict.
				return nil, fmt.Errorf("%w: %s", errCtlConflict, problemLine(ce))
			}
			if err != nil {
				return nil, err
			}
			v := struct {
				TaskID  string `json:"taskId"`
				Deleted bool   `json:"deleted"`
			}{x.args[0], true}
			return doneOut(v, fmt.Sprintf("deleted task %s", x.args[0])), nil
		}
	},
}

// optBytes turns an optional string flag into a byte field, nil when empty
// so the field is left out of the request.
func optBytes(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}
