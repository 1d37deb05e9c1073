package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fencepost/fencepost/fence/lease"
)

// printCtlOut writes out as indented JSON or as its table.
func printCtlOut(w io.Writer, format string, out *ctlOut) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out.v)
	}
	if out.table != nil {
		out.table(w)
	}
	return nil
}

// newTable returns the tabwriter every ctl table uses; the caller flushes.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// row writes one tab-separated line.
func row(tw io.Writer, cells ...string) {
	fmt.Fprintln(tw, strings.Join(cells, "\t"))
}

// dash shows an empty cell as "-" so columns stay aligned and greppable.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// relTime shows t relative to now ("in 18.2s", "3m4s ago"), which is what
// an operator looking at leases wants to know; "-" for the zero time.
func relTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Until(t)
	switch {
	case d >= 0:
		return "in " + roundDur(d).String()
	default:
		return roundDur(-d).String() + " ago"
	}
}

// roundDur rounds to 100ms below a minute and to seconds above, enough
// precision for leases of seconds to minutes.
func roundDur(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// msDur renders a wire duration in milliseconds.
func msDur(ms int64) string {
	return (time.Duration(ms) * time.Millisecond).String()
}

// showBytes renders a payload or checkpoint: quoted text when it is
// printable UTF-8, else base64 (as -o json would show it), truncated so a
// large payload does not flood the table.
func showBytes(b []byte) string {
	if len(b) == 0 {
		return "-"
	}
	const limit = 80
	if utf8.Valid(b) && strings.IndexFunc(string(b), func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		s := string(b)
		if len(s) > limit {
			return strconv.Quote(s[:limit]) + fmt.Sprintf("... (%d bytes)", len(b))
		}
		return strconv.Quote(s)
	}
	s := base64.StdEncoding.EncodeToString(b)
	if len(s) > limit {
		s = s[:limit] + "..."
	}
	return fmt.Sprintf("base64:%s (%d bytes)", s, len(b))
}

// leaseCell summarises a task's current lease for a list row.
func leaseCell(l *lease.Lease) (epoch, status, worker string) {
	if l == nil {
		return "-", "-", "-"
	}
	return strconv.FormatUint(l.Epoch, 10), string(l.Status), l.WorkerID
}

// checkpointCell summarises a checkpoint.
func checkpointCell(c *lease.Checkpoint) string {
	if c == nil {
		return "-"
	}
	s := fmt.Sprintf("seq %d", c.Seq)
	if c.Step != "" {
		s += " " + strconv.Quote(c.Step)
	}
	return s
}

// taskTable prints tasks one per row.
func taskTable(w io.Writer, tasks []*lease.Task, next string) {
	tw := newTable(w)
	row(tw, "TASK", "STATE", "PROFILE", "PRIORITY", "EPOCH", "LEASE", "WORKER", "ATTEMPTS", "CHECKPOINT", "UPDATED")
	for _, t := range tasks {
		epoch, status, worker := leaseCell(t.Lease)
		row(tw, t.ID, string(t.State), t.Profile, strconv.Itoa(t.Priority), epoch, status, worker,
			strconv.FormatUint(t.Attempts, 10), checkpointCell(t.Checkpoint), relTime(t.UpdatedAt.Time()))
	}
	_ = tw.Flush()
	if next != "" {
		fmt.Fprintf(w, "(more: --after %s)\n", next)
	}
}

// taskDetail prints one task as "key  value" lines, then its lease
// history and journal.
func taskDetail(w io.Writer, t *lease.Task) {
	tw := newTable(w)
	kv := func(k, v string) { row(tw, k, v) }
	kv("task", t.ID)
	kv("state", string(t.State))
	kv("profile", fmt.Sprintf("%s (ttl %s, heartbeat %s)", t.Profile, t.TTL, t.Heartbeat))
	kv("priority", strconv.Itoa(t.Priority))
	kv("attempts", strconv.FormatUint(t.Attempts, 10))
	kv("max epoch", strconv.FormatUint(t.MaxEpoch, 10))
	kv("created", relTime(t.CreatedAt.Time()))
	kv("updated", relTime(t.UpdatedAt.Time()))
	kv("payload", showBytes(t.Payload))
	if l := t.Lease; l != nil {
		kv("lease", fmt.Sprintf("epoch %d %s, worker %s, session %s, %s", l.Epoch, l.Status, l.WorkerID, l.SessionID, leaseWhen(l)))
		if l.Reason != "" {
			kv("lease reason", l.Reason) // worker_exited, worker_unhealthy, stalled, ...
		}
		if !l.ProgressAt.IsZero() {
			// The leader's: what its progress deadline counts from.
			kv("last progress", relTime(l.ProgressAt.Time()))
		}
	} else {
		kv("lease", "-")
	}
	if c := t.Checkpoint; c != nil {
		kv("checkpoint", fmt.Sprintf("%s, epoch %d, %s, data %s", checkpointCell(c), c.Epoch, relTime(c.At.Time()), showBytes(c.Data)))
	} else {
		kv("checkpoint", "-")
	}
	if !t.WaitDeadline().IsZero() {
		kv("wait until", relTime(t.WaitDeadline().Time()))
	}
	if len(t.Signal()) > 0 {
		kv("signal", showBytes(t.Signal()))
	}
	if len(t.Result()) > 0 {
		kv("result", showBytes(t.Result()))
	}
	if t.Reason() != "" {
		kv("reason", t.Reason())
	}
	if len(t.Journal()) > 0 {
		kv("journal", fmt.Sprintf("%d effect(s); -o json shows them", len(t.Journal())))
	}
	_ = tw.Flush()
	if len(t.History()) > 0 {
		fmt.Fprintln(w, "\nhistory:")
		leaseTable(w, t.History())
	}
}

// leaseTable prints leases one per row.
func leaseTable(w io.Writer, leases []lease.Lease) {
	tw := newTable(w)
	row(tw, "TASK", "EPOCH", "STATUS", "WORKER", "SESSION", "ACQUIRED", "HEARTBEAT", "EXPIRES", "REASON")
	for _, l := range leases {
		row(tw, l.TaskID, strconv.FormatUint(l.Epoch, 10), string(l.Status), l.WorkerID, l.SessionID,
			relTime(l.AcquiredAt.Time()), relTime(l.HeartbeatAt.Time()), expiresCell(&l), dash(l.Reason))
	}
	_ = tw.Flush()
}

// expiresCell is a lease's expiry while it is live; after that the expiry
// no longer means anything and "-" avoids suggesting it does.
func expiresCell(l *lease.Lease) string {
	if !l.Status.Live() {
		return "-"
	}
	return relTime(l.ExpiresAt.Time())
}

// leaseWhen says when a live lease expires, or since when it ended.
func leaseWhen(l *lease.Lease) string {
	if l.Status.Live() {
		return "expires " + relTime(l.ExpiresAt.Time())
	}
	return "since " + relTime(l.StatusAt.Time())
}

// taskOut is the output of the verbs that answer with a task.
func taskOut(t *lease.Task) *ctlOut {
	return &ctlOut{v: t, table: func(w io.Writer) { taskDetail(w, t) }}
}

// doneOut is the output of a verb the API answers with no body: JSON
// scripts can still parse, and one line for people.
func doneOut(v any, line string) *ctlOut {
	return &ctlOut{v: v, table: func(w io.Writer) { fmt.Fprintln(w, line) }}
}
