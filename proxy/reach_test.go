package proxy

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/fence/api"
)

// TestProxyRefusesClusterAndItself: with a current lease, a worker still
// cannot reach the cluster's API or the sidecar's own ports through the
// proxy (curl -x sidecar -X POST http://<cluster>/v1/tasks/other/revoke),
// by name, by address or by CONNECT; other hosts still work.
func TestProxyRefusesClusterAndItself(t *testing.T) {
	fc := newFakeCluster()
	cluster := startUpstream(t, nil) // stands in for a cluster member
	other := startUpstream(t, nil)
	cfg := baseConfig(t)
	_, clusterPort, _ := strings.Cut(cluster.addr(), ":")
	cfg.Endpoints = []string{"http://" + cluster.addr(), "member-2.fence.svc:7400"}
	cfg.ConnectAllow = []string{cluster.addr()}
	s := startSidecar(t, fc, cfg)
	mustAcquire(t, s, "mine")
	c := proxyClient(t, s, "mine")

	_, ctlPort, _ := strings.Cut(s.ControlAddr(), ":")
	_, proxyPort, _ := strings.Cut(s.ProxyAddr(), ":")
	for _, target := range []string{
		"http://" + cluster.addr() + "/v1/tasks/other/revoke",
		"http://localhost:" + clusterPort + "/v1/tasks/other/revoke",
		"http://[::ffff:127.0.0.1]:" + clusterPort + "/v1/tasks/other/revoke",
		"http://MEMBER-2.fence.svc:7400/v1/tasks/other/cancel",
		"http://127.0.0.1:" + ctlPort + "/v1/giveback",
		"http://localhost:" + ctlPort + "/v1/giveback",
		"http://127.0.0.2:" + ctlPort + "/v1/giveback",
		"http://0.0.0.0:" + proxyPort + "/",
	} {
		resp, body := doReq(t, c, "POST", target, "{}", map[string][]string{"Content-Type": {"application/json"}})
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "%s: %s", target, body)
		require.Equal(t, api.ProblemTypeBase+CodeSelfTarget, problemOf(t, body).Type, target)
	}
	require.Empty(t, cluster.requests(), "nothing reached the cluster")
	require.Len(t, s.Leases(), 1, "the lease was not given away")

	// CONNECT to the cluster is refused even when allow-listed.
	req, err := http.NewRequest(http.MethodConnect, "http://"+s.ProxyAddr(), nil)
	require.NoError(t, err)
	req.Host = cluster.addr()
	resp, err := http.DefaultTransport.RoundTrip(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	resp, body := doReq(t, c, "POST", "http://"+other.addr()+"/ok", "x", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
}

// TestControlRefusesCrossSite: the control API answers only JSON from
// loopback, same-origin; the same request done right still works.
func TestControlRefusesCrossSite(t *testing.T) {
	fc := newFakeCluster()
	s := startSidecar(t, fc, baseConfig(t))
	mustAcquire(t, s, "job")
	send := func(host, origin, ctype string) int {
		req, err := http.NewRequest(http.MethodPost, "http://"+s.ControlAddr()+PathGiveBack, strings.NewReader(`{"taskId":"job"}`))
		require.NoError(t, err)
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode
	}
	require.Equal(t, http.StatusUnsupportedMediaType, send("", "", "text/plain"), "a cross-site form body")
	require.Equal(t, http.StatusUnsupportedMediaType, send("", "", ""), "no content type")
	require.Equal(t, http.StatusForbidden, send("evil.example:4781", "", "application/json"), "DNS rebinding")
	require.Equal(t, http.StatusForbidden, send("", "http://evil.example", "application/json"), "foreign Origin")
	require.Equal(t, http.StatusForbidden, send("", "null", "application/json"), "opaque Origin")
	require.Len(t, s.Leases(), 1, "the lease is still held")
	require.Equal(t, http.StatusOK, send("", "http://"+s.ControlAddr(), "application/json; charset=utf-8"))
	require.Empty(t, s.Leases(), "given back by the legitimate request")
}

// TestSignatureOnlyToListedHosts: with SignatureHosts set, a third-party
// API gets the epoch but not the signature that a fenced service believes.
func TestSignatureOnlyToListedHosts(t *testing.T) {
	fc := newFakeCluster()
	fc.Signature = "ed25519=k1:c2ln"
	fenced := startUpstream(t, nil)
	thirdParty := startUpstream(t, nil)
	cfg := baseConfig(t)
	cfg.SignatureHosts = []string{fenced.addr()}
	s := startSidecar(t, fc, cfg)
	g := mustAcquire(t, s, "job")
	require.Equal(t, fc.Signature, g.TokenSignature)
	c := proxyClient(t, s, "job")
	for _, up := range []*upstreamServer{fenced, thirdParty} {
		resp, body := doReq(t, c, "POST", "http://"+up.addr()+"/w", "x", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
	}
	require.Equal(t, []string{g.TokenSignature}, fenced.requests()[0].values("X-Fencing-Signature"))
	require.Empty(t, thirdParty.requests()[0].values("X-Fencing-Signature"))
	require.NotEmpty(t, thirdParty.requests()[0].values("X-Fencing-Token"))
}

// TestProxyRefusesEverySpellingOfTheCluster replays the insider probe of
// issue 30: the guard compares canonical forms, so no spelling of the
// cluster's API, its raft port (refuse_targets) or the sidecar's control
// port gets through, by absolute form or by CONNECT. (A member host that
// is not this machine is refused on every port: a unit test in package
// request shows it without sending anything off loopback.)
func TestProxyRefusesEverySpellingOfTheCluster(t *testing.T) {
	fc := newFakeCluster()
	cluster := startUpstream(t, nil)
	raft := startUpstream(t, nil) // stands in for the member's raft port
	cfg := baseConfig(t)
	_, clusterPort, _ := strings.Cut(cluster.addr(), ":")
	_, raftPort, _ := strings.Cut(raft.addr(), ":")
	cfg.Endpoints = []string{"http://" + cluster.addr()}
	cfg.RefuseTargets = []string{raft.addr()}
	cfg.ConnectAllow = []string{cluster.addr(), raft.addr()}
	s := startSidecar(t, fc, cfg)
	mustAcquire(t, s, "mine")
	c := proxyClient(t, s, "mine")
	_, ctlPort, _ := strings.Cut(s.ControlAddr(), ":")

	var hostports []string
	for _, port := range []string{clusterPort, "0" + clusterPort, raftPort, "00" + raftPort, ctlPort, "0" + ctlPort} {
		for _, host := range []string{"localhost.", "LOCALHOST..", "127.0.0.1.", "127.1", "127.0.1", "0177.0.0.1",
			"0x7f.0.0.1", "0x7f000001", "2130706433", "017700000001", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]",
			"[::1]", "[0:0:0:0:0:0:0:1]", "0.0.0.0", "0", "[::]", "api.localhost", "127.9.9.9"} {
			hostports = append(hostports, host+":"+port)
		}
	}
	for _, hp := range hostports {
		resp, body := doReq(t, c, "POST", "http://"+hp+"/v1/giveback", `{"taskId":"mine"}`, map[string][]string{"Content-Type": {"application/json"}})
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "%s: %s", hp, body)
		require.Equal(t, api.ProblemTypeBase+CodeSelfTarget, problemOf(t, body).Type, hp)

		req, err := http.NewRequest(http.MethodConnect, "http://"+s.ProxyAddr(), nil)
		require.NoError(t, err)
		req.Host = hp
		resp, err = http.DefaultTransport.RoundTrip(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "CONNECT %s", hp)
	}
	require.Empty(t, cluster.requests(), "nothing reached the cluster's API")
	require.Empty(t, raft.requests(), "nothing reached the raft port")
	require.Len(t, s.Leases(), 1, "the lease was not given away")
}
