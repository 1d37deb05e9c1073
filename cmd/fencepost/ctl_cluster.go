package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/cluster"
)

// ctlProbeTimeout bounds the readiness probe of each member in 'status'; a
// member that does not answer that fast is reported as such rather than
// holding up the whole command.
const ctlProbeTimeout = time.Second

var ctlStatus = &ctlCmd{
	name:    "status",
	summary: "leader, term, commit and applied index, and every member's own state, last contact and readiness",
	bind: func(*flag.FlagSet) ctlAction {
		return func(x *ctlCall) (*ctlOut, error) {
			// Every member is asked itself, so a member that is down, cut
			// off or lagging shows as such, and a leaderless member asked
			// first does not hide the leader the others know.
			h, err := askEveryMember(x.ctx, x.client)
			if err != nil {
				return nil, err
			}
			out := &ctlOut{v: h}
			if x.g.output == "table" {
				ready := probeMembers(x.ctx, x.client, h.Members)
				out.table = func(w io.Writer) { statusTable(w, h, ready) }
			}
			return out, nil
		}
	},
}

// probeMembers asks each member with an HTTP address whether it is ready,
// concurrently, and returns one cell per member.
func probeMembers(ctx context.Context, c *cluster.Client, members []api.Member) []string {
	ready := make([]string, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		if m.HTTPAddr == "" {
			ready[i] = "-"
			continue
		}
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, ctlProbeTimeout)
			defer cancel()
			err := c.Ready(pctx, m.HTTPAddr)
			var ce *cluster.Error
			switch {
			case err == nil:
				ready[i] = "yes"
			case errors.As(err, &ce):
				ready[i] = "no (" + ce.Problem.Code + ")"
			default:
				ready[i] = "no (" + lastCause(err) + ")"
			}
		})
	}
	wg.Wait()
	return ready
}

// statusTable prints the cluster summary and its members.
func statusTable(w io.Writer, h clusterHealth, ready []string) {
	st := h.ClusterStatus
	tw := newTable(w)
	leader := dash(st.Leader)
	if st.LeaderHTTP != "" {
		leader += " (" + st.LeaderHTTP + ")"
	}
	row(tw, "answered by", fmt.Sprintf("%s (%s)", st.NodeID, st.State))
	row(tw, "leader", leader)
	row(tw, "term", strconv.FormatUint(st.Term, 10))
	row(tw, "commit index", strconv.FormatUint(st.CommitIndex, 10))
	row(tw, "applied index", strconv.FormatUint(st.AppliedIndex, 10))
	_ = tw.Flush()
	fmt.Fprintln(w)
	healthTable(w, h, ready, time.Now())
}

var ctlMembersList = &ctlCmd{
	name:    "members list",
	summary: "list the raft voters, each with its own state and last contact",
	bind: func(*flag.FlagSet) ctlAction {
		return func(x *ctlCall) (*ctlOut, error) {
			h, err := askEveryMember(x.ctx, x.client)
			if err != nil {
				return nil, err
			}
			v := struct {
				Members []api.Member   `json:"members"`
				Health  []memberHealth `json:"health"`
			}{h.Members, h.Health}
			return &ctlOut{v: v, table: func(w io.Writer) { healthTable(w, h, nil, time.Now()) }}, nil
		}
	},
}

var ctlMembersAdd = &ctlCmd{
	name:    "members add",
	args:    []string{"ID", "RAFT_ADDR", "HTTP_ADDR"},
	summary: "add a voter (idempotent); usually 'server --join' does this",
	bind: func(*flag.FlagSet) ctlAction {
		return func(x *ctlCall) (*ctlOut, error) {
			req := api.JoinRequest{ID: x.args[0], RaftAddr: x.args[1], HTTPAddr: x.args[2]}
			if err := x.client.Join(x.ctx, req); err != nil {
				return nil, err
			}
			return doneOut(req, fmt.Sprintf("member %s added (raft %s, http %s)", req.ID, req.RaftAddr, req.HTTPAddr)), nil
		}
	},
}

var ctlMembersRemove = &ctlCmd{
	name:    "members remove",
	args:    []string{"ID"},
	summary: "remove a voter",
	bind: func(*flag.FlagSet) ctlAction {
		return func(x *ctlCall) (*ctlOut, error) {
			if err := x.client.Remove(x.ctx, x.args[0]); err != nil {
				return nil, err
			}
			return doneOut(api.RemoveRequest{ID: x.args[0]}, fmt.Sprintf("member %s removed", x.args[0])), nil
		}
	},
}

var ctlLeasesList = &ctlCmd{
	name:     "leases list",
	synopsis: "[--stale]",
	summary:  "list live leases (active, suspect_dead, expired) with their expiry",
	bind: func(fs *flag.FlagSet) ctlAction {
		stale := fs.Bool("stale", false, "read the answering member's replica, skipping the linearizable round")
		return func(x *ctlCall) (*ctlOut, error) {
			var list api.LeaseList
			var err error
			if x.shards != nil {
				list, err = leasesAcross(x.ctx, x.shards, *stale)
			} else {
				list, err = x.client.Leases(x.ctx, *stale)
			}
			if err != nil {
				return nil, err
			}
			if list.Leases == nil {
				list.Leases = []lease.Lease{}
			}
			return &ctlOut{v: list, table: func(w io.Writer) { leaseTable(w, list.Leases) }}, nil
		}
	},
}

var ctlKeys = &ctlCmd{
	name:    "keys",
	summary: "the Ed25519 public keys that sign fencing tokens (for downstream checks)",
	bind: func(*flag.FlagSet) ctlAction {
		return func(x *ctlCall) (*ctlOut, error) {
			keys, err := x.client.Keys(x.ctx)
			if err != nil {
				return nil, err
			}
			if keys.Keys == nil {
				keys.Keys = []api.PublicKey{}
			}
			return &ctlOut{v: keys, table: func(w io.Writer) {
				tw := newTable(w)
				row(tw, "ID", "ALG", "PUBLIC KEY (base64)")
				for _, k := range keys.Keys {
					row(tw, k.ID, k.Alg, base64.StdEncoding.EncodeToString(k.PublicKey))
				}
				_ = tw.Flush()
			}}, nil
		}
	},
}
