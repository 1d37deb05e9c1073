package httpapi_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/raftstore"
	"github.com/fencepost/fencepost/raftstore/httpapi"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// TestSnapshotOperatorsOnly: GET /v1/snapshot streams a verifiable backup
// to an operator at the leader; a follower names the leader instead of
// relaying the whole state; sidecars, readers, members and callers
// without a certificate are refused.
func TestSnapshotOperatorsOnly(t *testing.T) {
	c := startTLSCluster(t, 3, lease.Quota{})
	leader, follower := -1, -1
	for i, nd := range c.nodes {
		if nd.Store.IsLeader() {
			leader = i
		} else {
			follower = i
		}
	}
	op := c.as(t, leader, operator)
	require.Equal(t, http.StatusCreated, op.do("POST", api.PathTasks, api.CreateTaskRequest{TaskID: "job", Payload: []byte("p")}).status)

	r := op.do("GET", api.PathSnapshot, nil)
	require.Equal(t, http.StatusOK, r.status, "body: %.300s", r.body)
	require.Equal(t, raftstore.BackupContentType, r.header["Content-Type"])
	path := filepath.Join(t.TempDir(), "b")
	require.NoError(t, os.WriteFile(path, r.body, 0o600))
	hdr, err := raftstore.VerifyBackup(path)
	require.NoError(t, err)
	require.Equal(t, 1, hdr.Tasks)
	require.Equal(t, c.nodes[leader].Store.NodeID(), hdr.Node)

	fr := c.as(t, follower, operator).do("GET", api.PathSnapshot, nil)
	require.Equal(t, http.StatusServiceUnavailable, fr.status)
	require.Equal(t, c.nodes[leader].HTTP.Addr(), fr.header[httpapi.HeaderLeader], "a follower names the leader")

	for _, id := range []pki.Identity{sidecarA, reader, memberX} {
		c.as(t, leader, id).forbidden(c.as(t, leader, id).do("GET", api.PathSnapshot, nil), httpapi.CodeForbidden, `"backup"`)
	}
	anon := c.asTLS(t, leader, anonymousTLS(t, c))
	require.Equal(t, http.StatusUnauthorized, anon.do("GET", api.PathSnapshot, nil).status)

	audited := c.audit.FilterMessage("audit").FilterField(zap.String("route", api.PathSnapshot))
	require.Equal(t, 1, audited.FilterField(zap.String("who", operator.String())).FilterField(zap.Int("status", http.StatusOK)).Len(),
		"the operator's backup is audited")
	require.Equal(t, 3, audited.FilterField(zap.Bool("denied", true)).Len(), "every refused backup is audited")
}

// TestAuditOnThreeMembers: on a 3-member cluster an operator action sent
// to a follower is audited exactly once, by the leader, under the
// operator's identity and with the leader's answer; a refusal at a
// follower is audited by that follower; a sidecar's own session work is
// not audited at all.
func TestAuditOnThreeMembers(t *testing.T) {
	c := startTLSCluster(t, 3, lease.Quota{})
	leader, follower := -1, -1
	for i, nd := range c.nodes {
		if nd.Store.IsLeader() {
			leader = i
		} else {
			follower = i
		}
	}
	fop := c.as(t, follower, operator)
	require.Equal(t, http.StatusCreated, fop.do("POST", api.PathTasks, api.CreateTaskRequest{TaskID: "job"}).status)
	rid := "cancel-through-follower"
	r := fop.do("POST", taskURL(api.PathCancel, "job"), api.CancelRequest{Reason: "audit test"}, api.HeaderRequestID, rid)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	lines := c.audit.FilterMessage("audit").FilterField(zap.String("rid", rid)).All()
	require.Len(t, lines, 1, "a relayed operator action is audited once")
	fields := lines[0].ContextMap()
	require.Equal(t, operator.String(), fields["who"], "under the original caller, not the relaying member")
	require.Equal(t, string(httpapi.PermOperate), fields["permission"])
	require.Equal(t, int64(http.StatusOK), fields["status"])
	require.Equal(t, false, fields["denied"])

	fsc := c.as(t, follower, sidecarA)
	deny := "sidecar-cancel"
	fsc.forbidden(fsc.do("POST", taskURL(api.PathCancel, "job"), api.CancelRequest{}, api.HeaderRequestID, deny), httpapi.CodeForbidden, `"operate"`)
	lines = c.audit.FilterMessage("audit").FilterField(zap.String("rid", deny)).All()
	require.Len(t, lines, 1, "a refusal at a follower is audited there, once")
	require.Equal(t, sidecarA.String(), lines[0].ContextMap()["who"])
	require.Equal(t, true, lines[0].ContextMap()["denied"])

	var sess api.Session
	c.as(t, leader, sidecarA).do("POST", api.PathSessions, api.OpenSessionRequest{WorkerID: sidecarA.Name}, api.HeaderRequestID, "open-w").decode(t, &sess)
	require.Zero(t, c.audit.FilterField(zap.String("rid", "open-w")).Len(), "session work is not audited")
}

// anonymousTLS trusts the cluster's CA and presents no certificate.
func anonymousTLS(t *testing.T, c *tlsCluster) *tls.Config {
	t.Helper()
	caPEM, err := os.ReadFile(c.kit.CAFile)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13}
}
