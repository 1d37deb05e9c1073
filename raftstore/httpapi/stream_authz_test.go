package httpapi_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"testing"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/stretchr/testify/require"
)

// streamTLS is tc with the server name the members' certificates carry.
func streamTLS(tc *tls.Config) *tls.Config {
	tc = tc.Clone()
	tc.ServerName = "127.0.0.1"
	return tc
}

// TestAuthzStream: the stream is a sidecar's, and only for its own
// sessions: a caller without a certificate and a reader cannot open one;
// sidecar B's beat for A's session on B's stream is refused as a unary
// heartbeat is, and audited; A's beats work through the leader and are
// relayed by a follower, which names the leader.
func TestAuthzStream(t *testing.T) {
	c := startTLSCluster(t, 3, lease.Quota{})
	leader := 0
	for i, nd := range c.nodes {
		if nd.Store.IsLeader() {
			leader = i
		}
	}
	follower := (leader + 1) % 3
	caPEM, err := os.ReadFile(c.kit.CAFile)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))

	_, resp := upgrade(t, c.nodes[leader].HTTP.Addr(), streamTLS(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13}))
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a stranger")
	_, resp = upgrade(t, c.nodes[leader].HTTP.Addr(), streamTLS(c.kit.Client(reader.Role, reader.Name)))
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "a reader")

	a := c.as(t, leader, sidecarA)
	var sess api.Session
	a.do("POST", api.PathSessions, api.OpenSessionRequest{WorkerID: sidecarA.Name}).decode(t, &sess)
	var g api.Grant
	a.do("POST", taskURL(api.PathAcquire, "st"), api.AcquireRequest{SessionID: sess.SessionID, Create: true}).decode(t, &g)
	httpapitest.WaitFor(t, "the lease replicated", func() bool {
		tk, err := c.nodes[follower].Store.Task(t.Context(), "st", true)
		return err == nil && tk.Lease != nil
	})
	beat := api.HeartbeatRequest{Leases: []api.HeldLease{{TaskID: "st", Epoch: g.Lease.Epoch}}}

	for _, via := range []int{leader, follower} {
		bs, resp := upgrade(t, c.nodes[via].HTTP.Addr(), streamTLS(c.kit.Client(sidecarB.Role, sidecarB.Name)))
		require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
		bs.write(beatFrame(t, 1, sess.SessionID, beat))
		r := bs.mustRead()
		require.Equal(t, http.StatusForbidden, r.Status, "body: %s", r.Body)
		p := replyProblem(t, r)
		require.Equal(t, lease.ErrorCode(lease.ErrNotOwner), p.Code)
		require.Contains(t, p.Detail, "another identity")

		as, resp := upgrade(t, c.nodes[via].HTTP.Addr(), streamTLS(c.kit.Client(sidecarA.Role, sidecarA.Name)))
		require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
		as.write(beatFrame(t, 5, sess.SessionID, beat))
		r = as.mustRead()
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		var hb api.HeartbeatResponse
		require.NoError(t, json.Unmarshal(r.Body, &hb))
		require.Len(t, hb.Leases, 1)
		require.Positive(t, hb.Leases[0].ValidForMs)
		if via == follower {
			require.Equal(t, c.nodes[leader].HTTP.Addr(), string(r.Leader), "a follower relays and names the leader")
		} else {
			require.Empty(t, r.Leader)
		}
	}
	httpapitest.WaitFor(t, "B's refused beats audited", func() bool {
		n := 0
		for _, e := range c.audit.All() {
			f := e.ContextMap()
			if f["who"] == sidecarB.String() && f["route"] == api.PathHeartbeatStream && f["denied"] == true &&
				f["missing"] == "session.owner" {
				n++
			}
		}
		return n >= 1
	})
}
