package raftstore

import (
	"bytes"
	"crypto/tls"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/fence/pki/pkitest"
)

// injectVote sends a RequestVote for a far higher term claiming claimID,
// the RPC that made a leader step down in the probe.
func injectVote(t *testing.T, layer *strangerLayer, target *Store, claimID string) error {
	t.Helper()
	layer.closed = make(chan struct{})
	defer close(layer.closed)
	tr := raft.NewNetworkTransport(layer, 1, 5*time.Second, io.Discard)
	defer tr.Close()
	req := &raft.RequestVoteRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(claimID), Addr: []byte("stranger:1")},
		Term:      target.raft.CurrentTerm() + 100, LastLogIndex: target.raft.LastIndex() + 100, LastLogTerm: target.raft.CurrentTerm() + 100,
	}
	return tr.RequestVote(raft.ServerID(target.NodeID()), raft.ServerAddress(target.RaftAddr()), req, &raft.RequestVoteResponse{})
}

// requireRefusedInsider replays the probe's attack with src (a member
// certificate the CA issued): an AppendEntries that would inject a task
// and a RequestVote for a higher term, on the leader and a follower. Each
// is refused with reason, and neither the term nor the log changes.
func requireRefusedInsider(t *testing.T, c *testCluster, cfg *tls.Config, name, reason string) {
	t.Helper()
	leader := c.waitForLeader()
	for i, target := range []*Store{leader, follower(c)} {
		counter := target.layer.refused.WithLabelValues(reason)
		before := testutil.ToFloat64(counter)
		term := target.raft.CurrentTerm()
		task := "insider-" + name + "-" + string(rune('a'+i))
		// A layer per transport: each one's listener reads its channel.
		require.Error(t, injectCreateTask(t, &strangerLayer{tls: cfg}, target, name, task))
		require.Error(t, injectVote(t, &strangerLayer{tls: cfg}, target, name))
		waitFor(t, waitTimeout, "both refusals to be counted", func() bool { return testutil.ToFloat64(counter) >= before+2 })
		require.Equal(t, term, target.raft.CurrentTerm(), "the term did not move")
		_, err := target.Task(ctxT(t), task, true)
		require.ErrorIs(t, err, lease.ErrTaskNotFound, "nothing was injected")
	}
	require.Equal(t, raft.Leader, leader.raft.State(), "the leader did not step down")
}

// TestMemberCertificateOfANonMemberIsRefused: n9's certificate is the
// cluster CA's, but n9 never joined.
func TestMemberCertificateOfANonMemberIsRefused(t *testing.T) {
	kit := pkitest.New(t, "cluster")
	c := newTestCluster(t, 3, withTLS(kit))
	requireRefusedInsider(t, c, insiderTLS(kit.Source(pki.RoleMember, "n9")), "n9", refusedNotMember)
	c.waitConverged()
	c.requireSameHash()
}

// TestRemovedMemberIsNeverAcceptedAgain: once removed, n2's certificate
// is refused on the raft port (the deny list, even with a configuration
// that would otherwise be empty of it), and it may not join again.
func TestRemovedMemberIsNeverAcceptedAgain(t *testing.T) {
	kit := pkitest.New(t, "cluster")
	c := newTestCluster(t, 3, withTLS(kit))
	leader := c.waitForLeader()
	victim := follower(c)
	id, addr := victim.NodeID(), victim.RaftAddr()
	_, err := retryLeader(c, func(s *Store) (struct{}, error) { return struct{}{}, s.Remove(ctxT(t), id) })
	require.NoError(t, err)
	waitFor(t, waitTimeout, "every member to know the removal", func() bool {
		for _, s := range c.snapshot() {
			if s != nil && s != victim && !s.fsm.isRemoved(id) {
				return false
			}
		}
		return true
	})
	c.stop(c.index(victim))
	requireRefusedInsider(t, c, insiderTLS(kit.Source(pki.RoleMember, id)), id, refusedRemoved)

	err = leader.Join(ctxT(t), api.JoinRequest{ID: id, RaftAddr: addr})
	require.ErrorIs(t, err, ErrMembership)
	require.ErrorContains(t, err, "never accepted again")
	require.NotContains(t, voters(t, c.waitForLeader()), id)
}

// TestRemovedNamesSurviveASnapshot: the deny list is replicated state.
func TestRemovedNamesSurviveASnapshot(t *testing.T) {
	f := newFSM(testLogger(t))
	data, err := encodeEntry(entryRemoved, removedMember{ID: "n3"})
	require.NoError(t, err)
	f.Apply(&raft.Log{Index: 1, Data: data})
	require.True(t, f.isRemoved("n3"))
	g := newFSM(testLogger(t))
	require.NoError(t, g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))))
	require.True(t, g.isRemoved("n3"))
	require.False(t, g.isRemoved("n1"))
	require.Equal(t, f.StateHash(), g.StateHash())
}

// TestRevokedMemberIsRefusedOnTheRaftPort: a member loading a revocation
// list refuses the listed member's handshake.
func TestRevokedMemberIsRefusedOnTheRaftPort(t *testing.T) {
	kit := pkitest.New(t, "cluster")
	bad := kit.Files(pki.RoleMember, "n1", time.Hour)
	crl := kit.Revoke(bad)
	c := newTestCluster(t, 1, func(cfg *Config) {
		f := kit.Files(pki.RoleMember, cfg.NodeID, time.Hour)
		f.CRL = crl
		src, err := pki.NewSource(f)
		require.NoError(t, err)
		cfg.TLS = src
	})
	s := c.node(0)
	counter := s.layer.refused.WithLabelValues(refusedRevoked)
	src, err := pki.NewSource(bad)
	require.NoError(t, err)
	require.Error(t, injectCreateTask(t, &strangerLayer{tls: insiderTLS(src)}, s, "n1", "revoked"))
	waitFor(t, waitTimeout, "the refusal to be counted", func() bool { return testutil.ToFloat64(counter) == 1 })
	_, err = s.Task(ctxT(t), "revoked", true)
	require.ErrorIs(t, err, lease.ErrTaskNotFound)
}

// insiderTLS presents src's certificate without verifying the server:
// the attacker's client.
func insiderTLS(src *pki.Source) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true, //nolint:gosec // the attacker
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return src.Current().Cert, nil }}
}

// follower returns a live node that is not the leader.
func follower(c *testCluster) *Store {
	leader := c.waitForLeader()
	for _, s := range c.live() {
		if s != leader {
			return s
		}
	}
	c.t.Fatal("no follower")
	return nil
}
