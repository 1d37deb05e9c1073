package httpapi_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/fence/pki/pkitest"
	"github.com/fencepost/fencepost/raftstore"
	"github.com/fencepost/fencepost/raftstore/httpapi"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/fencepost/fencepost/raftstore/node"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// tlsCluster is a real cluster serving its API over TLS with client
// certificates from one test CA.
type tlsCluster struct {
	kit   *pkitest.Kit
	nodes []*node.Node
	audit *observer.ObservedLogs
}

// startTLSCluster starts n members; members after the first are added by
// the leader's store directly (joining over the API is the transport's
// business, not authorization's).
func startTLSCluster(t *testing.T, n int, quota lease.Quota) *tlsCluster {
	t.Helper()
	return startTLSClusterWith(t, n, quota, func(*httpapi.Config) {})
}

// startTLSClusterWith is startTLSCluster with mod applied to every
// member's API configuration.
func startTLSClusterWith(t *testing.T, n int, quota lease.Quota, mod func(*httpapi.Config)) *tlsCluster {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	c := &tlsCluster{kit: pkitest.New(t, "test CA"), audit: logs}
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		hc := httpapi.Config{Addr: "127.0.0.1:0", TLS: c.kit.Source(pki.RoleMember, id),
			AuditLogger: zap.New(core), BodyReaders: []string{"auditor"}}
		mod(&hc)
		nd, err := node.Start(node.Config{
			Store: raftstore.Config{
				NodeID: id, DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", Bootstrap: i == 0,
				HeartbeatTimeout: 150 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
				LeaderLeaseTimeout: 150 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
				Quota: quota,
			},
			HTTP:   hc,
			Logger: zaptest.NewLogger(t, zaptest.Level(zapcore.WarnLevel)).With(zap.String("node", id)),
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = nd.Close() })
		c.nodes = append(c.nodes, nd)
		if i == 0 {
			httpapitest.WaitFor(t, "the first member leads", func() bool { return nd.Store.IsLeader() && nd.Store.Ready() == nil })
			continue
		}
		require.NoError(t, c.nodes[0].Store.Join(t.Context(), api.JoinRequest{ID: id, RaftAddr: nd.Store.RaftAddr(), HTTPAddr: nd.HTTP.Addr()}))
	}
	httpapitest.WaitFor(t, "every member knows the leader", func() bool {
		for _, nd := range c.nodes {
			if nd.Store.LeaderHTTP() == "" || nd.Store.Ready() != nil || len(nd.Store.Status().Members) != n {
				return false
			}
		}
		return true
	})
	return c
}

// as is a client presenting one identity's certificate.
type as struct {
	t   *testing.T
	c   *fasthttp.Client
	url string
}

func (c *tlsCluster) as(t *testing.T, nodeIdx int, id pki.Identity) *as {
	return c.asTLS(t, nodeIdx, c.kit.Client(id.Role, id.Name))
}

func (c *tlsCluster) asTLS(t *testing.T, nodeIdx int, cfg *tls.Config) *as {
	return &as{t: t, url: "https://" + c.nodes[nodeIdx].HTTP.Addr(),
		c: &fasthttp.Client{TLSConfig: cfg, MaxIdemponentCallAttempts: 1, DisablePathNormalizing: true}}
}

func (a *as) try(method, path string, body any, headers ...string) (reply, error) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI(a.url + path)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(mustJSON(a.t, body))
	}
	if err := a.c.DoTimeout(req, resp, 5*time.Second); err != nil {
		return reply{}, err
	}
	r := reply{status: resp.StatusCode(), header: map[string]string{}, body: append([]byte(nil), resp.Body()...)}
	for k, v := range resp.Header.All() {
		r.header[string(k)] = string(v)
	}
	return r, nil
}

func (a *as) do(method, path string, body any, headers ...string) reply {
	a.t.Helper()
	r, err := a.try(method, path, body, headers...)
	require.NoError(a.t, err)
	return r
}

// forbidden requires a 403 problem naming what was missing.
func (a *as) forbidden(r reply, code, missing string) {
	a.t.Helper()
	require.Equal(a.t, http.StatusForbidden, r.status, "body: %s", r.body)
	p := r.problem(a.t)
	require.Equal(a.t, code, p.Code)
	require.Contains(a.t, p.Detail, missing)
}

var (
	sidecarA = pki.Identity{Name: "worker-a", Role: pki.RoleSidecar}
	sidecarB = pki.Identity{Name: "worker-b", Role: pki.RoleSidecar}
	operator = pki.Identity{Name: "alice", Role: pki.RoleOperator}
	reader   = pki.Identity{Name: "dashboard", Role: pki.RoleReader}
	auditor  = pki.Identity{Name: "auditor", Role: pki.RoleReader}
	memberX  = pki.Identity{Name: "n9", Role: pki.RoleMember}
)

func taskURL(tmpl, id string) string { return strings.Replace(tmpl, "{id}", id, 1) }
func sessURL(tmpl, id string) string { return strings.Replace(tmpl, "{sid}", id, 1) }

// TestAuthzStrangers: without a certificate from the cluster's CA only the
// probes' routes and the public keys answer.
func TestAuthzStrangers(t *testing.T) {
	c := startTLSCluster(t, 1, lease.Quota{})
	caPEM, err := os.ReadFile(c.kit.CAFile)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	anon := c.asTLS(t, 0, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13})
	for _, path := range []string{api.PathTasks, api.PathLeases, api.PathCluster} {
		r := anon.do("GET", path, nil)
		require.Equal(t, http.StatusUnauthorized, r.status, "%s: %s", path, r.body)
		require.Equal(t, httpapi.CodeUnauthenticated, r.problem(t).Code)
	}
	for _, path := range []string{taskURL(api.PathRevoke, "x"), api.PathSessions, api.PathClusterJoin, taskURL(api.PathTaskBlocked, "x")} {
		r := anon.do("POST", path, struct{}{})
		require.Equal(t, http.StatusUnauthorized, r.status, "%s: %s", path, r.body)
	}
	for _, path := range []string{api.PathHealth, api.PathKeys} {
		require.Equal(t, http.StatusOK, anon.do("GET", path, nil).status, path)
	}
	other := pkitest.New(t, "other CA")
	cfg := other.Client(operator.Role, operator.Name)
	cfg.RootCAs = roots
	_, err = c.asTLS(t, 0, cfg).try("GET", api.PathTasks, nil)
	require.Error(t, err, "a certificate from another CA fails the handshake")
	// Plain HTTP to the TLS port gets no API answer.
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + c.nodes[0].HTTP.Addr() + api.PathTasks)
	if err := (&fasthttp.Client{}).DoTimeout(req, resp, 5*time.Second); err == nil {
		require.NotEqual(t, http.StatusOK, resp.StatusCode())
	}
}

// TestAuthzSessionsBelongToTheirOpener: with sidecar B's credentials
// nothing of sidecar A's session or its task can be touched through the
// leader or a follower, while A itself works.
func TestAuthzSessionsBelongToTheirOpener(t *testing.T) {
	c := startTLSCluster(t, 3, lease.Quota{})
	leader := 0
	for i, nd := range c.nodes {
		if nd.Store.IsLeader() {
			leader = i
		}
	}
	follower := (leader + 1) % 3
	for _, via := range []int{leader, follower} {
		a, b := c.as(t, via, sidecarA), c.as(t, via, sidecarB)
		var sess api.Session
		a.do("POST", api.PathSessions, api.OpenSessionRequest{WorkerID: sidecarA.Name}).decode(t, &sess)
		task := fmt.Sprintf("t-%d", via)
		var g api.Grant
		a.do("POST", taskURL(api.PathAcquire, task), api.AcquireRequest{SessionID: sess.SessionID, Create: true}).decode(t, &g)
		ep := g.Lease.Epoch
		// A watch answers from the node's own replica: wait until it
		// has the session (it has the lease granted through it).
		httpapitest.WaitFor(t, "the lease replicated", func() bool {
			tk, err := c.nodes[via].Store.Task(t.Context(), task, true)
			return err == nil && tk.Lease != nil
		})

		notOwner := lease.ErrorCode(lease.ErrNotOwner)
		b.forbidden(b.do("POST", sessURL(api.PathHeartbeat, sess.SessionID), api.HeartbeatRequest{}), notOwner, "another identity")
		b.forbidden(b.do("GET", sessURL(api.PathWatch, sess.SessionID)+"?timeoutMs=1", nil), notOwner, "another identity")
		b.forbidden(b.do("POST", taskURL(api.PathCheckpoint, task), api.CheckpointRequest{SessionID: sess.SessionID, Epoch: ep, Seq: 99}), notOwner, "another identity")
		b.forbidden(b.do("POST", taskURL(api.PathAcquire, task), api.AcquireRequest{SessionID: sess.SessionID}), notOwner, "another identity")
		b.forbidden(b.do("POST", api.PathClaim, api.ClaimRequest{SessionID: sess.SessionID}), notOwner, "another identity")
		b.forbidden(b.do("POST", taskURL(api.PathWait, task), api.WaitRequest{SessionID: sess.SessionID, Epoch: ep}), notOwner, "another identity")
		b.forbidden(b.do("POST", taskURL(api.PathRelease, task), api.ReleaseRequest{SessionID: sess.SessionID, Epoch: ep, Outcome: lease.OutcomeCompleted}), notOwner, "another identity")
		b.forbidden(b.do("POST", taskURL(api.PathIntent, task), api.IntentRequest{SessionID: sess.SessionID, Epoch: ep, Key: "k", Method: "POST", URL: "http://x/", DeadlineMs: 1000}), notOwner, "another identity")
		b.forbidden(b.do("POST", api.PathSessions, api.OpenSessionRequest{SessionID: sess.SessionID, WorkerID: sidecarB.Name}), notOwner, "another identity")
		b.forbidden(b.do("DELETE", sessURL(api.PathSession, sess.SessionID), nil), notOwner, "another identity")
		blocked := api.BlockedReport{SessionID: sess.SessionID, Epoch: ep, Reason: "expired", Count: 1}
		b.forbidden(b.do("POST", taskURL(api.PathTaskBlocked, task), blocked), notOwner, "another identity")
		// Operator routes and reads are not a sidecar's.
		b.forbidden(b.do("POST", taskURL(api.PathRevoke, task), api.RevokeRequest{}), httpapi.CodeForbidden, `"operate"`)
		b.forbidden(b.do("POST", taskURL(api.PathCancel, task), api.CancelRequest{}), httpapi.CodeForbidden, `"operate"`)
		b.forbidden(b.do("GET", api.PathTasks, nil), httpapi.CodeForbidden, `"read"`)
		b.forbidden(b.do("GET", api.PathLeases, nil), httpapi.CodeForbidden, `"read"`)
		// A sidecar cannot pretend to be a forwarding member.
		b.forbidden(b.do("POST", sessURL(api.PathHeartbeat, sess.SessionID), api.HeartbeatRequest{},
			httpapi.HeaderCaller, sidecarA.String()), httpapi.CodeForbidden, `"forward"`)

		// Nothing B tried took effect; A's own calls work.
		var hb api.HeartbeatResponse
		a.do("POST", sessURL(api.PathHeartbeat, sess.SessionID), api.HeartbeatRequest{}).decode(t, &hb)
		require.Len(t, hb.Leases, 1)
		require.Equal(t, lease.StatusActive, hb.Leases[0].Status)
		var tk lease.Task
		a.do("POST", taskURL(api.PathCheckpoint, task), api.CheckpointRequest{SessionID: sess.SessionID, Epoch: ep}).decode(t, &tk)
		require.Equal(t, uint64(1), tk.Checkpoint.Seq, "B's seq 99 was not applied")
		require.Equal(t, http.StatusNoContent, a.do("POST", taskURL(api.PathTaskBlocked, task), blocked).status, "A reports its own blocks")
		httpapitest.WaitFor(t, "A's report, and only it, on the history", func() bool {
			h, err := c.nodes[via].Store.TaskHistory(t.Context(), task)
			require.NoError(t, err)
			n := 0
			for _, e := range h.Events {
				if e.Kind == api.EventBlocked {
					require.Equal(t, sidecarA.String(), e.By)
					n++
				}
			}
			require.LessOrEqual(t, n, 1)
			return n == 1
		})
		a.do("POST", taskURL(api.PathRelease, task), api.ReleaseRequest{SessionID: sess.SessionID, Epoch: ep, Outcome: lease.OutcomeCompleted}).decode(t, &tk)
		require.Equal(t, http.StatusNoContent, a.do("DELETE", sessURL(api.PathSession, sess.SessionID), nil).status)
	}
	// A member's certificate used from outside may forward for someone,
	// but the leader then applies the named caller's permissions.
	m := c.as(t, leader, memberX)
	m.forbidden(m.do("POST", taskURL(api.PathRevoke, "t-0"), api.RevokeRequest{}, httpapi.HeaderCaller, sidecarB.String()),
		httpapi.CodeForbidden, `"operate"`)
}

// TestAuthzRoles: readers read without bodies (unless allowed), operators
// operate and are audited, denials are counted.
func TestAuthzRoles(t *testing.T) {
	c := startTLSCluster(t, 1, lease.Quota{})
	op, rd, au, sc := c.as(t, 0, operator), c.as(t, 0, reader), c.as(t, 0, auditor), c.as(t, 0, sidecarA)
	payload := []byte("secret payload")
	require.Equal(t, http.StatusCreated, op.do("POST", api.PathTasks, api.CreateTaskRequest{TaskID: "job", Payload: payload}).status)

	var list api.TaskList
	rd.do("GET", api.PathTasks, nil).decode(t, &list)
	require.Len(t, list.Tasks, 1)
	require.Nil(t, list.Tasks[0].Payload, "a list leaves payloads out")
	var tk lease.Task
	rd.do("GET", taskURL(api.PathTask, "job"), nil).decode(t, &tk)
	require.Nil(t, tk.Payload)
	rd.forbidden(rd.do("GET", api.PathTasks+"?bodies=true", nil), httpapi.CodeForbidden, `"read.bodies"`)
	rd.forbidden(rd.do("GET", taskURL(api.PathTask, "job")+"?bodies=true", nil), httpapi.CodeForbidden, `"read.bodies"`)
	au.do("GET", taskURL(api.PathTask, "job")+"?bodies=true", nil).decode(t, &tk)
	require.Equal(t, payload, tk.Payload, "a reader named in BodyReaders reads bodies")
	op.do("GET", api.PathTasks+"?bodies=true", nil).decode(t, &list)
	require.Equal(t, payload, list.Tasks[0].Payload)

	for _, who := range []*as{rd, sc} {
		who.forbidden(who.do("POST", taskURL(api.PathCancel, "job"), api.CancelRequest{}), httpapi.CodeForbidden, `"operate"`)
		who.forbidden(who.do("POST", taskURL(api.PathSignal, "job"), api.SignalRequest{}), httpapi.CodeForbidden, `"operate"`)
		who.forbidden(who.do("DELETE", taskURL(api.PathTask, "job"), nil), httpapi.CodeForbidden, `"operate"`)
		who.forbidden(who.do("POST", api.PathClusterRemove, api.RemoveRequest{ID: "n1"}), httpapi.CodeForbidden, `"membership"`)
	}
	rd.forbidden(rd.do("POST", api.PathSessions, api.OpenSessionRequest{WorkerID: "w"}), httpapi.CodeForbidden, `"session"`)
	rd.forbidden(rd.do("POST", taskURL(api.PathTaskBlocked, "job"), api.BlockedReport{SessionID: "s", Epoch: 1, Reason: "expired", Count: 1}),
		httpapi.CodeForbidden, `"session"`)
	rd.forbidden(rd.do("POST", api.PathTasks, api.CreateTaskRequest{TaskID: "x"}), httpapi.CodeForbidden, `"task.create"`)
	op.forbidden(op.do("POST", api.PathSessions, api.OpenSessionRequest{WorkerID: "w"}), httpapi.CodeForbidden, `"session"`)

	op.do("POST", taskURL(api.PathCancel, "job"), api.CancelRequest{Reason: "test"}).decode(t, &tk)
	require.Equal(t, lease.TaskCancelled, tk.State)
	entries := c.audit.FilterMessage("audit").FilterField(zap.String("who", operator.String())).
		FilterField(zap.String("route", api.PathCancel)).All()
	require.Len(t, entries, 1, "the operator's cancel is audited")
	require.Equal(t, int64(http.StatusOK), entries[0].ContextMap()["status"])
	denied := c.audit.FilterField(zap.Bool("denied", true)).FilterField(zap.String("who", sidecarA.String())).Len()
	require.Equal(t, 4, denied, "every denial is audited")
	var sess api.Session
	sc.do("POST", api.PathSessions, api.OpenSessionRequest{WorkerID: sidecarA.Name}).decode(t, &sess)
	bad := sc.do("POST", taskURL(api.PathTaskBlocked, "job"), api.BlockedReport{SessionID: sess.SessionID, Epoch: 1, Reason: "expired"})
	require.Equal(t, http.StatusBadRequest, bad.status, "%s", bad.body)
	require.Contains(t, bad.problem(t).Detail, "count must be at least 1")
	other := c.as(t, 0, sidecarB)
	other.forbidden(other.do("DELETE", sessURL(api.PathSession, sess.SessionID), nil), lease.ErrorCode(lease.ErrNotOwner), "another identity")
	require.Equal(t, 1, c.audit.FilterField(zap.String("missing", "session.owner")).FilterField(zap.String("who", sidecarB.String())).Len(),
		"a refusal by session ownership is audited too")

	r := rd.do("GET", api.PathMetrics, nil)
	require.Contains(t, string(r.body), `fencepost_http_denied_total{permission="operate",role="sidecar"} 3`)
	require.Contains(t, string(r.body), `fencepost_http_denied_total{permission="read.bodies",role="reader"} 2`)
	require.Contains(t, string(r.body), `fencepost_http_denied_total{permission="session.owner",role="sidecar"} 1`)
}

// TestAuthzQuotas: a sidecar's sessions, tasks and payload bytes are
// bounded (429), other sidecars are not affected.
func TestAuthzQuotas(t *testing.T) {
	c := startTLSCluster(t, 1, lease.Quota{Sessions: 2, Tasks: 3, Bytes: 100})
	a, b := c.as(t, 0, sidecarA), c.as(t, 0, sidecarB)
	var s1 api.Session
	a.do("POST", api.PathSessions, api.OpenSessionRequest{WorkerID: sidecarA.Name}).decode(t, &s1)
	require.Equal(t, http.StatusCreated, a.do("POST", api.PathSessions, api.OpenSessionRequest{WorkerID: sidecarA.Name}).status)
	r := a.do("POST", api.PathSessions, api.OpenSessionRequest{WorkerID: sidecarA.Name})
	require.Equal(t, http.StatusTooManyRequests, r.status, "body: %s", r.body)
	require.Equal(t, lease.ErrorCode(lease.ErrQuota), r.problem(t).Code)
	require.Equal(t, http.StatusCreated, b.do("POST", api.PathSessions, api.OpenSessionRequest{WorkerID: sidecarB.Name}).status)

	r = a.do("POST", api.PathTasks, api.CreateTaskRequest{TaskID: "big", Payload: make([]byte, 101)})
	require.Equal(t, http.StatusTooManyRequests, r.status, "body: %s", r.body)
	for i := range 3 {
		require.Equal(t, http.StatusCreated, a.do("POST", api.PathTasks, api.CreateTaskRequest{TaskID: fmt.Sprint("t", i)}).status)
	}
	r = a.do("POST", taskURL(api.PathAcquire, "t9"), api.AcquireRequest{SessionID: s1.SessionID, Create: true})
	require.Equal(t, http.StatusTooManyRequests, r.status, "body: %s", r.body)
	// Acquiring an existing task takes no quota.
	require.Equal(t, http.StatusOK, a.do("POST", taskURL(api.PathAcquire, "t0"), api.AcquireRequest{SessionID: s1.SessionID}).status)
	require.Equal(t, http.StatusCreated, b.do("POST", api.PathTasks, api.CreateTaskRequest{TaskID: "tb"}).status)
}

// TestAuthzRateLimited: one identity past its request rate gets 429 with
// Retry-After; another identity is not affected.
func TestAuthzRateLimited(t *testing.T) {
	c := startTLSClusterWith(t, 1, lease.Quota{}, func(h *httpapi.Config) { h.RatePerIdentity, h.RateBurst = 1, 5 })
	a, b := c.as(t, 0, reader), c.as(t, 0, auditor)
	limited := 0
	for range 10 {
		r := a.do("GET", api.PathLeases, nil)
		if r.status == http.StatusTooManyRequests {
			limited++
			require.Equal(t, httpapi.CodeRateLimited, r.problem(t).Code)
			require.NotEmpty(t, r.header["Retry-After"])
		}
	}
	require.GreaterOrEqual(t, limited, 4, "a burst of 5 at 1/s leaves at most 6 of 10 through")
	require.Equal(t, http.StatusOK, b.do("GET", api.PathLeases, nil).status)
}

// TestAuthzRateUnlimited: a negative rate (the file's 0) is no limit, not
// a bucket that never fills.
func TestAuthzRateUnlimited(t *testing.T) {
	c := startTLSClusterWith(t, 1, lease.Quota{}, func(h *httpapi.Config) { h.RatePerIdentity, h.RateBurst = -1, -1 })
	a := c.as(t, 0, reader)
	for i := range 50 {
		r := a.do("GET", api.PathLeases, nil)
		require.NotEqual(t, http.StatusTooManyRequests, r.status, "request %d limited: %s", i, r.body)
	}
}

// TestAuthzPprofOperatorsOnly: with the profiler on, only operators reach
// it; a reader or a sidecar gets 403 naming "profile", a caller without a
// certificate 401.
func TestAuthzPprofOperatorsOnly(t *testing.T) {
	c := startTLSClusterWith(t, 1, lease.Quota{}, func(h *httpapi.Config) { h.Pprof = true })
	const path = "/debug/pprof/cmdline"
	require.Equal(t, http.StatusOK, c.as(t, 0, operator).do("GET", path, nil).status)
	for _, id := range []pki.Identity{reader, sidecarA} {
		a := c.as(t, 0, id)
		a.forbidden(a.do("GET", path, nil), httpapi.CodeForbidden, `"profile"`)
	}
	caPEM, err := os.ReadFile(c.kit.CAFile)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	anon := c.asTLS(t, 0, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13})
	require.Equal(t, http.StatusUnauthorized, anon.do("GET", path, nil).status)
}
