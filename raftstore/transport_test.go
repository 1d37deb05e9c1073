package raftstore

import (
	"crypto/tls"
	"io"
	"net"
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

// withTLS gives every node of a test cluster a member certificate naming
// it, from kit's CA.
func withTLS(kit *pkitest.Kit) func(*Config) {
	return func(c *Config) { c.TLS = kit.Source(pki.RoleMember, c.NodeID) }
}

func TestTLSClusterReplicates(t *testing.T) {
	c := newTestCluster(t, 3, withTLS(pkitest.New(t, "cluster")))
	_, err := retryLeader(c, func(s *Store) (*lease.Task, error) {
		return s.CreateTask(ctxT(t), "rid-1", api.CreateTaskRequest{TaskID: "t1"})
	})
	require.NoError(t, err)
	c.waitConverged()
	c.requireSameHash()
}

// strangerLayer dials with a fixed client tls.Config (nil: plaintext) and
// accepts nothing: enough for a raft transport that only sends.
type strangerLayer struct {
	tls    *tls.Config
	closed chan struct{}
}

func (l *strangerLayer) Accept() (net.Conn, error) { <-l.closed; return nil, net.ErrClosed }
func (l *strangerLayer) Close() error              { return nil }
func (l *strangerLayer) Addr() net.Addr            { return advAddr("stranger:1") }
func (l *strangerLayer) Dial(a raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(a), timeout)
	if err != nil || l.tls == nil {
		return c, err
	}
	tc := tls.Client(c, l.tls)
	if err := tc.Handshake(); err != nil {
		_ = c.Close()
		return nil, err
	}
	return tc, nil
}

// injectCreateTask sends an AppendEntries claiming to come from claimID
// that would create task on target, and returns the transport's error.
func injectCreateTask(t *testing.T, layer *strangerLayer, target *Store, claimID, task string) error {
	t.Helper()
	layer.closed = make(chan struct{})
	defer close(layer.closed)
	tr := raft.NewNetworkTransport(layer, 1, 5*time.Second, io.Discard)
	defer tr.Close()
	data, err := encodeEntry(entryCommand, &lease.Command{Op: lease.OpCreateTask, TaskID: task, RequestID: "inject-" + task, Time: time.Now()})
	require.NoError(t, err)
	last := target.raft.LastIndex()
	term := target.raft.CurrentTerm()
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(claimID), Addr: []byte("stranger:1")},
		Term:      term + 100, PrevLogEntry: last, PrevLogTerm: term,
		Entries:           []*raft.Log{{Index: last + 1, Term: term + 100, Type: raft.LogCommand, Data: data}},
		LeaderCommitIndex: last + 1,
	}
	return tr.AppendEntries(raft.ServerID(target.NodeID()), raft.ServerAddress(target.RaftAddr()), req, &raft.AppendEntriesResponse{})
}

// TestStrangersCannotSpeakRaft plays the bad-input list against a TLS
// member: each is refused with a reason counted, nothing is applied, and
// the cluster keeps serving.
func TestStrangersCannotSpeakRaft(t *testing.T) {
	kit := pkitest.New(t, "cluster")
	c := newTestCluster(t, 3, withTLS(kit))
	victim := c.node(1)
	expired, err := pki.NewSource(kit.Files(pki.RoleMember, "n9", -time.Hour))
	require.NoError(t, err)
	insecure := func(src *pki.Source) *tls.Config {
		return &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true, //nolint:gosec // a stranger
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return src.Current().Cert, nil }}
	}
	cases := []struct {
		name, reason string
		layer        *strangerLayer
		claim        string
	}{
		{"plaintext to the TLS port", refusedHandshake, &strangerLayer{}, "n0"},
		{"a certificate from another CA", refusedHandshake, &strangerLayer{tls: insecure(pkitest.New(t, "other").Source(pki.RoleMember, "n0"))}, "n0"},
		{"an expired member certificate", refusedHandshake, &strangerLayer{tls: insecure(expired)}, "n9"},
		{"a sidecar certificate", refusedRole, &strangerLayer{tls: insecure(kit.Source(pki.RoleSidecar, "n0"))}, "n0"},
		{"a member certificate claiming another member", refusedClaim, &strangerLayer{tls: insecure(kit.Source(pki.RoleMember, "n9"))}, "n0"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			counter := victim.layer.refused.WithLabelValues(tc.reason)
			before := testutil.ToFloat64(counter)
			applied := victim.AppliedIndex()
			task := "injected-" + string(rune('a'+i))
			require.Error(t, injectCreateTask(t, tc.layer, victim, tc.claim, task))
			waitFor(t, waitTimeout, "the refusal to be counted", func() bool { return testutil.ToFloat64(counter) > before })
			_, err := victim.Task(ctxT(t), task, true)
			require.ErrorIs(t, err, lease.ErrTaskNotFound, "nothing was applied")
			require.GreaterOrEqual(t, victim.AppliedIndex(), applied)
		})
	}
	// The members still serve: a write commits on all three.
	_, err = retryLeader(c, func(s *Store) (*lease.Task, error) {
		return s.CreateTask(ctxT(t), "after", api.CreateTaskRequest{TaskID: "after"})
	})
	require.NoError(t, err)
	c.waitConverged()
	c.requireSameHash()
}

func TestTLSClientOnPlaintextRaftPortIsRefused(t *testing.T) {
	c := newTestCluster(t, 1)
	s := c.node(0)
	counter := s.layer.refused.WithLabelValues(refusedTLSClient)
	kit := pkitest.New(t, "cluster")
	layer := &strangerLayer{tls: kit.Source(pki.RoleMember, "n0").ClientConfig("localhost")}
	require.Error(t, injectCreateTask(t, layer, s, "n0", "tls-on-plain"))
	waitFor(t, waitTimeout, "the refusal to be counted", func() bool { return testutil.ToFloat64(counter) == 1 })
	_, err := s.Task(ctxT(t), "tls-on-plain", true)
	require.ErrorIs(t, err, lease.ErrTaskNotFound)
}

func tlsServerHandshake(c net.Conn, cfg *tls.Config) error {
	tc := tls.Server(c, cfg)
	_ = tc.SetDeadline(time.Now().Add(waitTimeout))
	return tc.Handshake()
}
