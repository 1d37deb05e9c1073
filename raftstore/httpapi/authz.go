package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/raftstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
)

// Permission is what a route requires of its caller. Each route names
// exactly one (routes.go); each role holds a fixed set (rolePerms).
type Permission string

// The permissions. A denial's problem names the one that was missing.
const (
	// PermPublic: anyone, with or without a certificate: the probes'
	// /healthz and /readyz, /metrics (counts, no ids) and /v1/keys (public
	// keys, which fenced services fetch).
	PermPublic Permission = "public"
	// PermSession: open sessions and act through them (heartbeat, watch,
	// acquire, claim, checkpoint, wait, release, journal). The model
	// refuses a session-scoped command from anyone but the session's
	// owner, so a sidecar acts only through its own sessions.
	PermSession Permission = "session"
	// PermCreate: create tasks.
	PermCreate Permission = "task.create"
	// PermRead: list and get tasks, leases and the cluster's status,
	// without payloads, checkpoint data, signals, results or journaled
	// bodies.
	PermRead Permission = "read"
	// PermReadBodies: the bodies PermRead leaves out (?bodies=true).
	PermReadBodies Permission = "read.bodies"
	// PermOperate: revoke, cancel, signal and delete tasks.
	PermOperate Permission = "operate"
	// PermMembership: add and remove members.
	PermMembership Permission = "membership"
	// PermBackup: take a backup of the whole state (GET /v1/snapshot),
	// every payload and checkpoint included.
	PermBackup Permission = "backup"
	// PermProfile: Go's profiler under /debug/pprof/ (Config.Pprof).
	PermProfile Permission = "profile"
	// PermForward: speak for another identity (a follower relaying a
	// request to the leader, HeaderCaller).
	PermForward Permission = "forward"
)

// rolePerms is the one table of what each role may do.
var rolePerms = map[pki.Role][]Permission{
	pki.RoleSidecar:  {PermSession, PermCreate},
	pki.RoleOperator: {PermCreate, PermRead, PermReadBodies, PermOperate, PermMembership, PermProfile, PermBackup},
	pki.RoleReader:   {PermRead},
	pki.RoleMember:   {PermRead, PermMembership, PermForward},
	// A service certificate cannot authenticate a client (server usage
	// only); were one presented, it would still be allowed nothing.
	pki.RoleService: nil,
}

// HeaderCaller carries, on a request a follower forwards to the leader, the
// identity of the original caller ("role/name"). The leader believes it
// only from a peer whose own certificate has PermForward (a member);
// from anyone else it is refused.
const HeaderCaller = "X-Fencepost-Caller"

// DevIdentity is who every caller is when the API runs without TLS (only
// allowed on loopback): one identity holding every permission, not bound
// to sessions and without quotas. Startup logs say so at warn level.
var DevIdentity = pki.Identity{Name: "dev", Role: "dev"}

// principal is the caller of one request, decided once in serve.
type principal struct {
	id  pki.Identity
	dev bool
	// anon is a TLS caller without a client certificate: only PermPublic.
	anon bool
	// perms is the role's set from roleSets, shared, never written.
	perms map[Permission]bool
	// bodyReader is a reader named in Config.BodyReaders: PermReadBodies too.
	bodyReader bool
	// workers are the worker ids a sidecar's certificate allows
	// (pki.WorkerIDs); relayed marks a request a member forwarded, whose
	// worker id the member checked against the certificate it saw.
	workers []string
	relayed bool
}

// checkWorker refuses a sidecar a session under a worker id its
// certificate does not name (pki.WorkerIDs: its own name by default), so
// one worker's certificate cannot write under another's name. Callers
// that never act through a session as a worker (dev, operators) are not
// bound.
func (p principal) checkWorker(worker string) error {
	if p.dev || p.relayed || p.id.Role != pki.RoleSidecar || pki.MayUseWorker(p.workers, worker) {
		return nil
	}
	return &wrongWorker{who: p.id, worker: worker, allowed: p.workers}
}

// wrongWorker is a 403: a session under a worker id the certificate does
// not name.
type wrongWorker struct {
	who     pki.Identity
	worker  string
	allowed []string
}

func (w *wrongWorker) Error() string {
	return fmt.Sprintf("%s may open sessions only as %q, not as worker %q (issue its certificate with --worker-ids to add one)",
		w.who, w.allowed, w.worker)
}

func (w *wrongWorker) Unwrap() error { return ErrWorkerNotBound }

func (p principal) has(perm Permission) bool {
	return p.dev || perm == PermPublic || p.perms[perm] || (perm == PermReadBodies && p.bodyReader)
}

// roleSets is rolePerms as sets, built once: identifying a caller is on
// every request's path and allocates nothing.
var roleSets = func() map[pki.Role]map[Permission]bool {
	out := make(map[pki.Role]map[Permission]bool, len(rolePerms))
	for role, perms := range rolePerms {
		set := make(map[Permission]bool, len(perms))
		for _, perm := range perms {
			set[perm] = true
		}
		out[role] = set
	}
	return out
}()

// caller is what the store is told about p (raftstore.Caller): sidecars
// own their sessions and are held to quotas; an operator, a reader or the
// dev identity never acts through a session, so none is bound.
func (p principal) caller() raftstore.Caller {
	if p.dev || p.id.Role != pki.RoleSidecar {
		return raftstore.Caller{}
	}
	return raftstore.Caller{Owner: p.id.String(), Limited: true}
}

func principalOf(id pki.Identity, bodyReaders map[string]bool) principal {
	return principal{id: id, perms: roleSets[id.Role], bodyReader: id.Role == pki.RoleReader && bodyReaders[id.Name]}
}

// identify decides who sent rc: the verified client certificate's
// identity, or, for a request a member forwarded, the identity it carries.
// Without TLS every caller is DevIdentity.
func (s *Server) identify(rc *fasthttp.RequestCtx) (principal, error) {
	if s.cfg.TLS == nil || authzOff {
		return principal{id: DevIdentity, dev: true}, nil
	}
	id, err := pki.IdentityFromState(rc.TLSConnectionState())
	if errors.Is(err, pki.ErrNoCertificate) {
		// The handshake asks for a certificate without requiring one
		// (pki.ClientAuth), so probes reach the public routes.
		return principal{id: pki.Identity{Name: "anonymous"}, anon: true}, nil
	}
	if err != nil {
		return principal{}, fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	p := principalOf(id, s.bodyReaders)
	fwd := rc.Request.Header.Peek(HeaderCaller)
	if len(fwd) == 0 {
		if id.Role == pki.RoleSidecar {
			p.workers = pki.WorkerIDsFromState(rc.TLSConnectionState())
		}
		return p, nil
	}
	if !p.has(PermForward) {
		return p, &denied{perm: PermForward, who: id}
	}
	role, name, ok := strings.Cut(string(fwd), "/")
	orig := pki.Identity{Name: name, Role: pki.Role(role)}
	if !ok || name == "" || !orig.Role.Valid() {
		return p, fmt.Errorf("%w: %s %q is not role/name", ErrBadRequest, HeaderCaller, fwd)
	}
	op := principalOf(orig, s.bodyReaders)
	op.relayed = true
	return op, nil
}

// denied is a 403: who lacked which permission.
type denied struct {
	perm Permission
	who  pki.Identity
}

func (d *denied) Error() string {
	return fmt.Sprintf("%s lacks permission %q", d.who, d.perm)
}

func (d *denied) Unwrap() error { return ErrForbidden }

// authorize checks p against the permission ep requires.
func (s *Server) authorize(p principal, ep endpoint) error {
	return p.require(ep.perm)
}

// require refuses p without perm: 401 when p sent no certificate, else
// 403 naming the permission.
func (p principal) require(perm Permission) error {
	switch {
	case p.has(perm):
		return nil
	case p.anon:
		return fmt.Errorf("%w: a client certificate from the cluster CA is required (permission %q)", ErrUnauthenticated, perm)
	}
	return &denied{perm: perm, who: p.id}
}

// permSessionOwner labels, in the denial metric and the audit log, the
// model's refusal of a command through another identity's session.
const permSessionOwner = "session.owner"

// permSessionWorker labels a session refused under a worker id the
// certificate does not name.
const permSessionWorker = "session.worker"

// deniedPermission reports whether err refuses the caller's identity, and
// what it lacked: a route's permission, or ownership of the session.
func deniedPermission(err error) (string, bool) {
	var d *denied
	switch {
	case errors.As(err, &d):
		return string(d.perm), true
	case errors.Is(err, lease.ErrNotOwner):
		return permSessionOwner, true
	case errors.Is(err, ErrWorkerNotBound):
		return permSessionWorker, true
	}
	return "", false
}

// audited lists the permissions whose use the audit log records: every
// operator action and membership change, allowed or not.
var audited = map[Permission]bool{PermOperate: true, PermMembership: true, PermReadBodies: true, PermBackup: true}

// audit writes one line of the audit log: who did what to which resource,
// when (the log's timestamp) and with what result.
// It also counts denials: this is the one place a refusal of the caller's
// identity is seen, whichever layer made it.
func (s *Server) audit(tc context.Context, p principal, perm Permission, rc *fasthttp.RequestCtx, route, rid string, err error) {
	s.auditCall(tc, p, perm, auditFacts{method: methodLabel(rc.Method()), path: rc.Path(), remote: rc.RemoteAddr(),
		status: rc.Response.StatusCode()}, route, rid, err)
}

// auditFacts are the request's side of an audit line: a unary request's
// from its RequestCtx, a streamed beat's from its stream (stream.go).
type auditFacts struct {
	method string
	path   []byte
	remote net.Addr
	status int
}

// auditCall is audit for any call, unary or streamed.
func (s *Server) auditCall(tc context.Context, p principal, perm Permission, f auditFacts, route, rid string, err error) {
	missing, isDenied := deniedPermission(err)
	if isDenied {
		s.metrics.denied.WithLabelValues(missing, string(p.id.Role)).Inc()
	}
	if isRefusal(err) {
		// A repeat of a refusal in the same burst is counted, not logged
		// (denials.go).
		k := denialKey{who: p.id.String(), missing: missing, route: route, source: addrHost(f.remote)}
		if !isDenied {
			k.missing = "authentication"
		}
		if !s.denials.note(k, f.status) {
			return
		}
	} else if !audited[perm] {
		return
	}
	s.auditLog.Info("audit", withTrace(tc,
		zap.String("who", p.id.String()),
		zap.String("permission", string(perm)),
		zap.String("method", f.method),
		zap.ByteString("path", f.path),
		zap.String("route", route),
		zap.String("rid", rid),
		zap.Int("status", f.status),
		zap.Bool("denied", isDenied),
		zap.String("missing", missing),
		zap.String("remote", f.remote.String()))...)
}

// newDeniedCounter is the denial metric: by permission and role, both
// from fixed sets.
func newDeniedCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencepost_http_denied_total",
		Help: "Cluster API requests refused for a missing permission, by permission and the caller's role.",
	}, []string{"permission", "role"})
}

// isLoopbackAddr reports whether a listen address binds loopback only.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
