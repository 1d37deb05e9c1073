package raftstore

import (
	"net"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/fence/pki/pkitest"
)

// voters returns the ids in s's raft configuration.
func voters(t *testing.T, s *Store) []string {
	t.Helper()
	f := s.raft.GetConfiguration()
	require.NoError(t, f.Error())
	var ids []string
	for _, srv := range f.Configuration().Servers {
		ids = append(ids, string(srv.ID))
	}
	return ids
}

// requireServes checks the node still commits writes.
func requireServes(t *testing.T, c *testCluster) {
	t.Helper()
	sid := openSession(t, c.waitForLeader(), "still-serving")
	require.NotEmpty(t, sid)
}

func TestJoinOfAnAddressNobodyServesIsRefused(t *testing.T) {
	c := newTestCluster(t, 1)
	s := c.node(0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())

	err = s.Join(ctxT(t), api.JoinRequest{ID: "bogus", RaftAddr: dead})
	require.ErrorIs(t, err, ErrMembership)
	require.Equal(t, []string{"n0"}, voters(t, s), "the bogus voter was not added")
	requireServes(t, c)
}

func TestJoinNeedsAMemberCertificateForTheID(t *testing.T) {
	kit := pkitest.New(t, "cluster")
	c := newTestCluster(t, 1, withTLS(kit))
	s := c.node(0)
	// A TLS listener with another CA's member certificate, and one of ours
	// naming another member.
	for name, src := range map[string]*pki.Source{
		"stranger CA":  pkitest.New(t, "other").Source(pki.RoleMember, "n1"),
		"another name": kit.Source(pki.RoleMember, "n9"),
		"a sidecar":    kit.Source(pki.RoleSidecar, "n1"),
	} {
		t.Run(name, func(t *testing.T) {
			srv, _ := src.MemberConfigs(nil)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			defer ln.Close()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() { defer c.Close(); _ = tlsServerHandshake(c, srv) }()
				}
			}()
			err = s.Join(ctxT(t), api.JoinRequest{ID: "n1", RaftAddr: ln.Addr().String()})
			require.ErrorIs(t, err, ErrMembership)
			require.Equal(t, []string{"n0"}, voters(t, s))
		})
	}
	requireServes(t, c)
}

func TestRemovingTheLastVoterIsRefused(t *testing.T) {
	c := newTestCluster(t, 1)
	s := c.node(0)
	err := s.Remove(ctxT(t), "n0")
	require.ErrorIs(t, err, ErrMembership)
	require.Equal(t, []string{"n0"}, voters(t, s))
	n, ok := s.fsm.node("n0")
	require.True(t, ok, "the member's address is kept")
	require.Equal(t, "http-n0", n.HTTPAddr)
	requireServes(t, c)
}

func TestRemoveTakesTheMemberOutThenItsAddress(t *testing.T) {
	c := newTestCluster(t, 3)
	leader := c.waitForLeader()
	var victim string
	for _, id := range voters(t, leader) {
		if id != leader.NodeID() {
			victim = id
			break
		}
	}
	require.NoError(t, leader.Remove(ctxT(t), victim))
	require.NotContains(t, voters(t, leader), victim)
	_, ok := leader.fsm.node(victim)
	require.False(t, ok)
	require.Equal(t, raft.Leader, leader.raft.State())
}

// TestRebuiltNodeReplacesTheOldEntry: a new id joining at an address an
// old member had is added, then the old entry is removed.
func TestRebuiltNodeReplacesTheOldEntry(t *testing.T) {
	c := newTestCluster(t, 3)
	addr := c.cfgs[2].RaftAddr
	c.stop(2)
	cfg := testConfig(t, "n9")
	cfg.RaftAddr = addr
	s, err := Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	_, err = retryLeader(c, func(l *Store) (struct{}, error) {
		return struct{}{}, l.Join(ctxT(t), api.JoinRequest{ID: "n9", RaftAddr: s.RaftAddr(), HTTPAddr: "http-n9"})
	})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"n0", "n1", "n9"}, voters(t, c.waitForLeader()))
	waitFor(t, waitTimeout, "the rebuilt node to catch up", func() bool { return s.Ready() == nil })
}
