package httpapi_test

import (
	"crypto/tls"
	"net/http"
	"testing"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/raftstore/httpapi"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// TestRefusalFloodsAreLimitedAndAggregated replays the probe's floods: an
// anonymous TLS client and a worker certificate each send a bounded burst
// of requests that are refused. Past the refusal budget each is answered
// 429 without reaching a route, and the audit log holds a few lines per
// caller whose counts add up to every refused request, not a line each.
func TestRefusalFloodsAreLimitedAndAggregated(t *testing.T) {
	const n = 400
	c := startTLSCluster(t, 1, lease.Quota{})
	anonCfg := c.kit.Client(pki.RoleSidecar, "nobody")
	anonCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tls.Certificate{}, nil }
	callers := []struct {
		client *as
		who    string
		status int
	}{
		{c.asTLS(t, 0, anonCfg), "/anonymous", http.StatusUnauthorized},
		{c.as(t, 0, sidecarA), sidecarA.String(), http.StatusForbidden},
	}
	for _, cl := range callers {
		limited := 0
		for range n {
			r := cl.client.do("POST", taskURL(api.PathRevoke, "t"), api.RevokeRequest{})
			switch r.status {
			case cl.status:
			case http.StatusTooManyRequests:
				require.Equal(t, httpapi.CodeRateLimited, r.problem(t).Code)
				limited++
			default:
				t.Fatalf("status %d: %s", r.status, r.body)
			}
		}
		require.Positive(t, limited, "%s was slowed down", cl.who)
		require.Less(t, limited, n)
	}
	require.NoError(t, c.nodes[0].HTTP.Close()) // ends the open bursts
	for _, cl := range callers {
		lines := c.audit.FilterField(zap.String("who", cl.who)).All()
		require.LessOrEqual(t, len(lines), 4, "a few lines, not %d", n)
		total := 0
		for _, e := range lines {
			if cnt, ok := e.ContextMap()["count"].(int64); ok {
				total += int(cnt)
			} else {
				total++
			}
		}
		require.Equal(t, n, total, "every refusal is accounted for: %v", lines)
	}
}
