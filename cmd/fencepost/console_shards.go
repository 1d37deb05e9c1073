package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/cluster"
)

// consoleShards is the console's cluster when it is given several
// (--clusters): lists merge every cluster's answers (the ctl's merges),
// a task's page and actions go to the cluster that holds the task
// (Shards.Locate, as ctl and the sidecar route), the Cluster page shows
// every cluster's members, each named "cluster/member" with its own
// readiness, and a cluster that does not answer shows as one unreachable
// row instead of failing the page. It implements console.Cluster.
type consoleShards struct {
	s *cluster.Shards

	mu      sync.Mutex
	feed    string            // this merged feed's id
	issued  uint64            // the last Next handed out
	cursors map[string]uint64 // each cluster's position
	feeds   map[string]string // each cluster's feed id
}

func newConsoleShards(s *cluster.Shards) *consoleShards {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &consoleShards{s: s, feed: "shards-" + hex.EncodeToString(b[:]), cursors: map[string]uint64{}, feeds: map[string]string{}}
}

func (c *consoleShards) at(ctx context.Context, taskID string) (*cluster.Client, error) {
	sh, err := c.s.Locate(ctx, taskID)
	if err != nil {
		return nil, err
	}
	return sh.Client, nil
}

// Tasks lists every cluster's tasks as one page (tasksAcross).
func (c *consoleShards) Tasks(ctx context.Context, f lease.TaskFilter, stale bool) (api.TaskList, error) {
	return tasksAcross(ctx, c.s, f, stale)
}

// Leases lists every cluster's live leases (leasesAcross).
func (c *consoleShards) Leases(ctx context.Context, stale bool) (api.LeaseList, error) {
	return leasesAcross(ctx, c.s, stale)
}

// TaskSummary reads the task from the cluster that holds it.
func (c *consoleShards) TaskSummary(ctx context.Context, taskID string, stale bool) (*lease.Task, error) {
	cl, err := c.at(ctx, taskID)
	if err != nil {
		return nil, err
	}
	return cl.TaskSummary(ctx, taskID, stale)
}

// TaskHistory reads the task's history from the cluster that holds it.
func (c *consoleShards) TaskHistory(ctx context.Context, taskID string) (api.TaskHistory, error) {
	cl, err := c.at(ctx, taskID)
	if err != nil {
		return api.TaskHistory{}, err
	}
	return cl.TaskHistory(ctx, taskID)
}

// Revoke revokes in the cluster that holds the task.
func (c *consoleShards) Revoke(ctx context.Context, taskID string, req api.RevokeRequest) (*lease.Task, error) {
	cl, err := c.at(ctx, taskID)
	if err != nil {
		return nil, err
	}
	return cl.Revoke(ctx, taskID, req)
}

// Cancel cancels in the cluster that holds the task.
func (c *consoleShards) Cancel(ctx context.Context, taskID string, req api.CancelRequest) (*lease.Task, error) {
	cl, err := c.at(ctx, taskID)
	if err != nil {
		return nil, err
	}
	return cl.Cancel(ctx, taskID, req)
}

// Signal signals in the cluster that holds the task.
func (c *consoleShards) Signal(ctx context.Context, taskID string, req api.SignalRequest) (*lease.Task, error) {
	cl, err := c.at(ctx, taskID)
	if err != nil {
		return nil, err
	}
	return cl.Signal(ctx, taskID, req)
}

// Sessions merges every cluster's sessions into one page in id order:
// the page ends at the smallest Next, below which every cluster's are
// all present (as tasksAcross pages).
func (c *consoleShards) Sessions(ctx context.Context, after string, limit int) (api.SessionList, error) {
	var all []api.SessionInfo
	next := ""
	for _, sh := range c.s.All() {
		list, err := sh.Client.Sessions(ctx, after, limit)
		if err != nil {
			return api.SessionList{}, fmt.Errorf("cluster %s: %w", sh.Name, err)
		}
		all = append(all, list.Sessions...)
		if list.Next != "" && (next == "" || list.Next < next) {
			next = list.Next
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].SessionID < all[j].SessionID })
	if next != "" {
		n := sort.Search(len(all), func(i int) bool { return all[i].SessionID > next })
		all = all[:n]
	}
	if limit > 0 && len(all) > limit {
		all = all[:limit]
		next = all[len(all)-1].SessionID
	}
	return api.SessionList{Sessions: all, Next: next}, nil
}

// Status is every cluster's members as one list, each named
// "cluster/member"; a cluster that does not answer is one unreachable
// row, its first endpoint as the address the page probes. The leader
// fields name each cluster's leader.
func (c *consoleShards) Status(ctx context.Context) (api.ClusterStatus, error) {
	shards := c.s.All()
	sts := make([]api.ClusterStatus, len(shards))
	errs := make([]error, len(shards))
	var wg sync.WaitGroup
	for i, sh := range shards {
		wg.Go(func() { sts[i], errs[i] = sh.Client.Status(ctx) })
	}
	wg.Wait()
	out := api.ClusterStatus{State: fmt.Sprintf("%d clusters", len(shards))}
	var leaders []string
	answered := 0
	for i, sh := range shards {
		if errs[i] != nil {
			out.Members = append(out.Members, api.Member{ID: sh.Name + "/(no answer: " + errs[i].Error() + ")",
				HTTPAddr: sh.Client.Endpoints()[0], Unreachable: true})
			continue
		}
		answered++
		if sts[i].Leader != "" {
			leaders = append(leaders, sh.Name+"/"+sts[i].Leader)
		}
		for _, m := range sts[i].Members {
			m.ID = sh.Name + "/" + m.ID
			out.Members = append(out.Members, m)
		}
	}
	if answered == 0 {
		return api.ClusterStatus{}, fmt.Errorf("no cluster answered: %w", errs[0])
	}
	out.Leader = strings.Join(leaders, ", ")
	return out, nil
}

// Ready asks one member, of any cluster, whether it is ready.
func (c *consoleShards) Ready(ctx context.Context, endpoint string) error {
	return c.s.All()[0].Client.Ready(ctx, endpoint)
}

// WatchEvents long-polls every cluster's event feed at once and answers
// with the events of those that answered first: one merged feed whose
// positions are this console's (each cluster's own position is kept
// here). A cluster that restarted its feed, or a since this feed did not
// hand out, makes the answer a reset, so the page reloads; a cluster that
// does not answer is left out until it does.
func (c *consoleShards) WatchEvents(ctx context.Context, since uint64, wait time.Duration) (api.EventFeed, error) {
	c.mu.Lock()
	if since == 0 || since != c.issued {
		clear(c.cursors)
		clear(c.feeds)
	}
	cursors := make(map[string]uint64, len(c.cursors))
	for k, v := range c.cursors {
		cursors[k] = v
	}
	c.mu.Unlock()

	type answer struct {
		name string
		feed api.EventFeed
		err  error
	}
	shards := c.s.All()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make(chan answer, len(shards))
	for _, sh := range shards {
		go func() {
			f, err := sh.Client.WatchEvents(wctx, cursors[sh.Name], wait)
			answers <- answer{sh.Name, f, err}
		}()
	}
	var got []answer
	var firstErr error
	for range shards {
		a := <-answers
		if a.err != nil {
			firstErr = cmpErr(firstErr, fmt.Errorf("cluster %s: %w", a.name, a.err))
			continue
		}
		got = append(got, a)
		if len(a.feed.Events) > 0 || a.feed.Reset {
			cancel() // enough to answer; the others keep their positions
		}
	}
	if len(got) == 0 {
		return api.EventFeed{}, firstErr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := api.EventFeed{Feed: c.feed}
	for _, a := range got {
		if old, ok := c.feeds[a.name]; (ok && old != a.feed.Feed) || a.feed.Reset {
			out.Reset = true
		}
		c.feeds[a.name], c.cursors[a.name] = a.feed.Feed, a.feed.Next
		out.Events = append(out.Events, a.feed.Events...)
	}
	c.issued++
	out.Next = c.issued
	return out, nil
}

// cmpErr keeps the first error.
func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}
