package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/proxy/cluster"
)

// memberHealth is one voter as ctl found it: its own answer when it gave
// one, else why not, and the leader's view of it.
type memberHealth struct {
	api.Member
	// Reached says the member answered; Error says why it did not.
	Reached bool   `json:"reached"`
	Error   string `json:"error,omitempty"`
	// State, Term and AppliedIndex are the member's own answer.
	State        string `json:"state,omitempty"`
	Term         uint64 `json:"term,omitempty"`
	AppliedIndex uint64 `json:"appliedIndex,omitempty"`
	// HeardFromLeader is when a reached follower last heard from the
	// leader (the leader's last contact with an unreachable member is in
	// Member.LastContact).
	HeardFromLeader time.Time `json:"heardFromLeader,omitzero"`
}

// clusterHealth is what `ctl status` and `ctl members list` show: the
// leader's status (or, without a leader, the best answer) and every
// voter's health, each asked directly.
type clusterHealth struct {
	api.ClusterStatus
	Health []memberHealth `json:"health"`
}

// askEveryMember asks every configured endpoint, then every voter any
// answer lists, for its own status, concurrently, each bounded by
// ctlProbeTimeout. It fails only when no member answered, naming each
// member's failure.
func askEveryMember(ctx context.Context, c *cluster.Client) (clusterHealth, error) {
	answers := map[string]api.ClusterStatus{} // by HTTP address
	failures := map[string]string{}
	var mu sync.Mutex
	ask := func(addrs []string) {
		var wg sync.WaitGroup
		for _, a := range addrs {
			wg.Go(func() {
				pctx, cancel := context.WithTimeout(ctx, ctlProbeTimeout)
				defer cancel()
				st, err := c.MemberStatus(pctx, a)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failures[a] = probeCause(err)
					return
				}
				answers[a] = st
			})
		}
		wg.Wait()
	}
	var first []string
	for _, ep := range c.Endpoints() {
		// Endpoints carry their scheme (https:// with TLS); members
		// report bare host:port, which is what seen compares.
		if _, hp, ok := strings.Cut(ep, "://"); ok {
			ep = hp
		}
		first = append(first, ep)
	}
	ask(first)
	seen := map[string]bool{}
	for _, a := range first {
		seen[a] = true
	}
	var more []string
	for _, st := range answers {
		for _, m := range st.Members {
			if m.HTTPAddr != "" && !seen[m.HTTPAddr] {
				seen[m.HTTPAddr] = true
				more = append(more, m.HTTPAddr)
			}
		}
	}
	ask(more)
	primary, ok := pickPrimary(answers)
	if !ok {
		var why []string
		for a, f := range failures {
			why = append(why, a+": "+f)
		}
		return clusterHealth{}, fmt.Errorf("%w: no member answered: %s", cluster.ErrUnavailable, strings.Join(why, "; "))
	}
	h := clusterHealth{ClusterStatus: primary}
	for _, m := range primary.Members {
		mh := memberHealth{Member: m}
		if st, ok := answers[m.HTTPAddr]; ok {
			mh.Reached, mh.State, mh.Term, mh.AppliedIndex, mh.HeardFromLeader = true, st.State, st.Term, st.AppliedIndex, st.LastContact
		} else {
			mh.Error = dash(failures[m.HTTPAddr])
		}
		h.Health = append(h.Health, mh)
	}
	return h, nil
}

// pickPrimary chooses the answer to summarize: the leader's own, else one
// that names a leader, else any — so a leaderless member asked first does
// not hide a leader another member knows.
func pickPrimary(answers map[string]api.ClusterStatus) (api.ClusterStatus, bool) {
	var best api.ClusterStatus
	rank := -1
	for _, st := range answers {
		r := 0
		switch {
		case st.State == "Leader":
			r = 3
		case st.Leader != "":
			r = 2
		}
		// Among equals, the highest term is the freshest view.
		if r > rank || (r == rank && st.Term > best.Term) {
			best, rank = st, r
		}
	}
	return best, rank >= 0
}

// probeCause is the short reason a member did not answer.
func probeCause(err error) string {
	var ce *cluster.Error
	if errors.As(err, &ce) {
		return ce.Problem.Code
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, cluster.ErrTimeout) {
		return "no answer within " + ctlProbeTimeout.String()
	}
	return lastCause(err)
}

// healthTable prints every voter with its own state and its contact with
// the leader; ready may be nil.
func healthTable(w io.Writer, h clusterHealth, ready []string, now time.Time) {
	tw := newTable(w)
	head := []string{"ID", "RAFT", "HTTP", "ROLE", "TERM", "APPLIED", "LAST CONTACT"}
	if ready != nil {
		head = append(head, "READY")
	}
	row(tw, head...)
	for i, m := range h.Health {
		role, term, applied, contact := "unreachable ("+m.Error+")", "-", "-", "-"
		if m.Reached {
			role = strings.ToLower(m.State)
			term, applied = strconv.FormatUint(m.Term, 10), strconv.FormatUint(m.AppliedIndex, 10)
			if !m.HeardFromLeader.IsZero() {
				contact = ago(now, m.HeardFromLeader) + " (from leader)"
			}
		}
		if m.Unreachable {
			contact = ago(now, m.LastContact) + " (leader's raft heartbeats fail)"
			if m.Reached {
				role += ", cut off from the leader"
			}
		}
		cells := []string{m.ID, m.RaftAddr, dash(m.HTTPAddr), role, term, applied, contact}
		if ready != nil {
			cells = append(cells, ready[i])
		}
		row(tw, cells...)
	}
	_ = tw.Flush()
}

// ago formats how long before now t was ("never" for the zero time).
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return now.Sub(t).Round(time.Millisecond).String() + " ago"
}
