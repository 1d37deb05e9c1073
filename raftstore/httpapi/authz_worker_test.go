package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/raftstore/httpapi"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// TestAuthzWorkerIDIsBoundToTheCertificate replays the probe: worker-a's
// certificate opening a session as worker-b is refused (403
// worker_not_bound) through the leader and a follower, so no lease and no
// signed token can carry worker-b; a certificate issued with extra worker
// ids may use them, and nothing else.
func TestAuthzWorkerIDIsBoundToTheCertificate(t *testing.T) {
	c := startTLSCluster(t, 2, lease.Quota{})
	for via := range c.nodes {
		a := c.as(t, via, sidecarA)
		r := a.do("POST", api.PathSessions, api.OpenSessionRequest{WorkerID: sidecarB.Name})
		a.forbidden(r, httpapi.CodeWorkerNotBound, `"worker-b"`)
		require.Equal(t, http.StatusCreated, a.do("POST", api.PathSessions, api.OpenSessionRequest{WorkerID: sidecarA.Name}).status)
	}
	multi := c.asTLS(t, 1, c.kitSource(t, "batch", "batch-1", "batch-2").ClientConfig(""))
	for _, w := range []string{"batch", "batch-1", "batch-2"} {
		require.Equal(t, http.StatusCreated, multi.do("POST", api.PathSessions, api.OpenSessionRequest{WorkerID: w}).status, w)
	}
	multi.forbidden(multi.do("POST", api.PathSessions, api.OpenSessionRequest{WorkerID: "batch-3"}), httpapi.CodeWorkerNotBound, `"batch-3"`)
	require.Equal(t, 3, c.audit.FilterField(zap.String("missing", "session.worker")).Len(), "each refusal is audited")

	// Operators do not act as workers; the rule is a sidecar's.
	op := c.as(t, 0, operator)
	op.forbidden(op.do("POST", api.PathSessions, api.OpenSessionRequest{WorkerID: "x"}), httpapi.CodeForbidden, `"session"`)
}

func (c *tlsCluster) kitSource(t *testing.T, name string, workers ...string) *pki.Source {
	t.Helper()
	src, err := pki.NewSource(c.kit.SidecarFiles(name, workers...))
	require.NoError(t, err)
	return src
}
