package httpapi_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"testing"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/raftstore/httpapi"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/stretchr/testify/require"
)

// TestHistoryIsForReadersOnly: a task's history, the event feed and the
// session list answer
// a reader and an operator; the sidecar that holds the task's lease gets
// nothing of them, another worker's sidecar neither, and a caller without
// a certificate is not even identified.
func TestHistoryIsForReadersOnly(t *testing.T) {
	c := startTLSCluster(t, 1, lease.Quota{})
	a := c.as(t, 0, sidecarA)
	var sess api.Session
	a.do("POST", api.PathSessions, api.OpenSessionRequest{WorkerID: sidecarA.Name}).decode(t, &sess)
	var g api.Grant
	a.do("POST", taskURL(api.PathAcquire, "h-1"), api.AcquireRequest{SessionID: sess.SessionID, Create: true}).decode(t, &g)
	op := c.as(t, 0, operator)
	op.do("POST", taskURL(api.PathRevoke, "h-1"), api.RevokeRequest{Epoch: g.Lease.Epoch, Reason: "test"}).decode(t, &lease.Task{})

	var h api.TaskHistory
	c.as(t, 0, reader).do("GET", taskURL(api.PathTaskHistory, "h-1"), nil).decode(t, &h)
	var kinds []string
	for _, e := range h.Events {
		kinds = append(kinds, e.Kind)
	}
	require.Equal(t, []string{"acquire", "revoke"}, kinds)
	require.Equal(t, g.Lease.Epoch, h.Events[1].Epoch)
	require.Equal(t, lease.StatusRevoked, h.Events[1].Status)
	require.Equal(t, "test", h.Events[1].Reason)
	require.Equal(t, sidecarA.String(), h.Events[0].By, "a sidecar's command names its identity")
	var ss api.SessionList
	c.as(t, 0, reader).do("GET", api.PathSessions, nil).decode(t, &ss)
	require.Len(t, ss.Sessions, 1)
	require.Equal(t, sidecarA.String(), ss.Sessions[0].Owner)
	require.Zero(t, ss.Sessions[0].Leases, "the revoked lease is not held")
	var feed api.EventFeed
	op.do("GET", api.PathEvents+"?since=0", nil).decode(t, &feed)
	require.NotZero(t, feed.Next)

	for _, sc := range []*as{a, c.as(t, 0, sidecarB)} {
		sc.forbidden(sc.do("GET", taskURL(api.PathTaskHistory, "h-1"), nil), httpapi.CodeForbidden, `"read"`)
		sc.forbidden(sc.do("GET", api.PathEvents, nil), httpapi.CodeForbidden, `"read"`)
		sc.forbidden(sc.do("GET", api.PathSessions, nil), httpapi.CodeForbidden, `"read"`)
	}
	caPEM, err := os.ReadFile(c.kit.CAFile)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	anon := c.asTLS(t, 0, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13})
	for _, path := range []string{taskURL(api.PathTaskHistory, "h-1"), api.PathEvents, api.PathSessions} {
		r := anon.do("GET", path, nil)
		require.Equal(t, http.StatusUnauthorized, r.status, "%s: %s", path, r.body)
		require.Equal(t, httpapi.CodeUnauthenticated, r.problem(t).Code)
	}
	r := op.do("GET", taskURL(api.PathTaskHistory, "nope"), nil)
	require.Equal(t, http.StatusNotFound, r.status)
	r = op.do("GET", api.PathEvents+"?since=x", nil)
	require.Equal(t, http.StatusBadRequest, r.status)
}

// TestHistoryNeedsAStoreThatKeepsOne: the in-memory double keeps none, so
// the route answers 404 rather than an empty history.
func TestHistoryNeedsAStoreThatKeepsOne(t *testing.T) {
	s := startServer(t, httpapitest.New())
	r := do(t, "GET", "http://"+s.Addr()+taskURL(api.PathTaskHistory, "x"), nil)
	require.Equal(t, http.StatusNotFound, r.status, "body: %s", r.body)
}
