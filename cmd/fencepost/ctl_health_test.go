package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"

	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
)

// A dead member is shown as unreachable — not as a follower — with the
// leader's last contact, and listing the dead member first does not hide
// the leader the others know.
func TestCtlStatusShowsADeadMemberAsUnreachable(t *testing.T) {
	c := httpapitest.StartCluster(t, 3, zapcore.WarnLevel)
	leader := c.WaitLeader()
	dead := c.Follower()
	deadAddr := c.Nodes[dead].HTTP.Addr()
	deadID := c.Nodes[dead].Store.NodeID()
	leaderID := c.Nodes[leader].Store.NodeID()
	c.Kill(dead)
	eps := deadAddr + "," + strings.Join(c.Endpoints(), ",")

	var out string
	require.Eventually(t, func() bool {
		out = ctlOK(t, eps, "status")
		return strings.Contains(out, "leader's raft heartbeats fail")
	}, ctlPollWait, 50*time.Millisecond, "the leader notices the dead member")
	require.Regexp(t, `leader\s+`+leaderID+` `, out)
	require.Regexp(t, deadID+`\s+\S+\s+`+deadAddr+`\s+unreachable \(`, out)
	require.Regexp(t, leaderID+`\s+\S+\s+\S+\s+leader\s`, out)

	list := ctlOK(t, eps, "members", "list")
	require.Regexp(t, deadID+`\s+\S+\s+`+deadAddr+`\s+unreachable`, list)
	require.NotRegexp(t, deadID+`\s+\S+\s+\S+\s+follower`, list)

	h := ctlJSON[clusterHealth](t, eps, "status")
	require.Equal(t, leaderID, h.Leader)
	for _, m := range h.Health {
		if m.ID == deadID {
			require.False(t, m.Reached)
			require.True(t, m.Unreachable)
			require.False(t, m.LastContact.IsZero())
		} else {
			require.True(t, m.Reached, "%s answered", m.ID)
		}
	}
}
