package httpapi

import (
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/valyala/fasthttp"
)

// jsonHandler serves one method of a JSON route. It returns the success
// status and the body to encode (nil for none), or an error that
// problems.go maps (ErrNotLeader makes the server forward instead).
type jsonHandler func(s *Server, c *call) (int, any, error)

// rawHandler serves a route that is not JSON (health, readiness, metrics).
type rawHandler func(s *Server, rc *fasthttp.RequestCtx)

// upgradeHandler serves a route whose connection becomes a stream: it
// answers 101 and hijacks rc, or returns the error to answer instead.
type upgradeHandler func(s *Server, rc *fasthttp.RequestCtx, who principal) error

// endpoint is one method of a route.
type endpoint struct {
	// perm is what a caller needs (authz.go); checked before the handler.
	perm Permission
	json jsonHandler
	raw  rawHandler
	// upgrade takes the connection over after authorization (stream.go).
	upgrade upgradeHandler
	// query lists the accepted query parameters; any other is a 400.
	query []string
}

// route is one path template of fence/api with its methods.
type route struct {
	template string
	segs     []string // literal segments, or "{id}", "{sid}", "{key}"
	methods  map[string]endpoint
	allow    string // the Allow header of a 405
}

// params are the path parameters of a matched route, already unescaped.
type params struct {
	id, sid, key string
}

// buildRoutes turns the api path constants into a routing table. Templates
// come from fence/api, so the server cannot drift from the client.
func buildRoutes() []*route {
	defs := []struct {
		path, method string
		ep           endpoint
	}{
		{api.PathSessions, fasthttp.MethodPost, endpoint{perm: PermSession, json: (*Server).openSession}},
		{api.PathSession, fasthttp.MethodDelete, endpoint{perm: PermSession, json: (*Server).closeSession}},
		{api.PathHeartbeat, fasthttp.MethodPost, endpoint{perm: PermSession, json: (*Server).heartbeat}},
		{api.PathHeartbeatStream, fasthttp.MethodPost, endpoint{perm: PermSession, upgrade: (*Server).openStream}},
		{api.PathWatch, fasthttp.MethodGet, endpoint{perm: PermSession, json: (*Server).watch,
			query: []string{api.QueryWatchSince, api.QueryWatchTimeout}}},
		{api.PathTasks, fasthttp.MethodPost, endpoint{perm: PermCreate, json: (*Server).createTask}},
		{api.PathTasks, fasthttp.MethodGet, endpoint{perm: PermRead, json: (*Server).listTasks,
			query: []string{api.QueryStale, api.QueryBodies, "state", "status", "after", "limit"}}},
		{api.PathTask, fasthttp.MethodGet, endpoint{perm: PermRead, json: (*Server).getTask,
			query: []string{api.QueryStale, api.QueryBodies}}},
		{api.PathTask, fasthttp.MethodDelete, endpoint{perm: PermOperate, json: (*Server).deleteTask}},
		{api.PathAcquire, fasthttp.MethodPost, endpoint{perm: PermSession, json: (*Server).acquire}},
		{api.PathClaim, fasthttp.MethodPost, endpoint{perm: PermSession, json: (*Server).claim}},
		{api.PathCheckpoint, fasthttp.MethodPost, endpoint{perm: PermSession, json: (*Server).checkpoint}},
		{api.PathWait, fasthttp.MethodPost, endpoint{perm: PermSession, json: (*Server).wait}},
		{api.PathSignal, fasthttp.MethodPost, endpoint{perm: PermOperate, json: (*Server).signal}},
		{api.PathRelease, fasthttp.MethodPost, endpoint{perm: PermSession, json: (*Server).release}},
		{api.PathRevoke, fasthttp.MethodPost, endpoint{perm: PermOperate, json: (*Server).revoke}},
		{api.PathCancel, fasthttp.MethodPost, endpoint{perm: PermOperate, json: (*Server).cancel}},
		{api.PathIntent, fasthttp.MethodPost, endpoint{perm: PermSession, json: (*Server).intent}},
		{api.PathOutcome, fasthttp.MethodPost, endpoint{perm: PermSession, json: (*Server).outcome}},
		{api.PathTaskHistory, fasthttp.MethodGet, endpoint{perm: PermRead, json: (*Server).taskHistory}},
		{api.PathTaskBlocked, fasthttp.MethodPost, endpoint{perm: PermSession, json: (*Server).reportBlocked}},
		{api.PathSessions, fasthttp.MethodGet, endpoint{perm: PermRead, json: (*Server).listSessions,
			query: []string{api.QueryStale, "after", "limit"}}},
		{api.PathEvents, fasthttp.MethodGet, endpoint{perm: PermRead, json: (*Server).events,
			query: []string{api.QueryWatchSince, api.QueryWatchTimeout}}},
		{api.PathLeases, fasthttp.MethodGet, endpoint{perm: PermRead, json: (*Server).leases,
			query: []string{api.QueryStale, "after", "limit"}}},
		{api.PathKeys, fasthttp.MethodGet, endpoint{perm: PermPublic, json: (*Server).keys}},
		{api.PathCluster, fasthttp.MethodGet, endpoint{perm: PermRead, json: (*Server).status}},
		{api.PathClusterJoin, fasthttp.MethodPost, endpoint{perm: PermMembership, json: (*Server).join}},
		{api.PathClusterRemove, fasthttp.MethodPost, endpoint{perm: PermMembership, json: (*Server).remove}},
		{api.PathSnapshot, fasthttp.MethodGet, endpoint{perm: PermBackup, raw: (*Server).snapshot}},
		{api.PathHealth, fasthttp.MethodGet, endpoint{perm: PermPublic, raw: (*Server).health}},
		{api.PathReady, fasthttp.MethodGet, endpoint{perm: PermPublic, raw: (*Server).ready}},
		{api.PathMetrics, fasthttp.MethodGet, endpoint{perm: PermPublic, raw: (*Server).metricsHandler}},
	}
	var routes []*route
	byPath := map[string]*route{}
	for _, d := range defs {
		r := byPath[d.path]
		if r == nil {
			r = &route{template: d.path, segs: strings.Split(strings.TrimPrefix(d.path, "/"), "/"),
				methods: map[string]endpoint{}}
			byPath[d.path] = r
			routes = append(routes, r)
		}
		r.methods[d.method] = d.ep
		// HEAD is answered for every GET, as HTTP requires.
		if d.method == fasthttp.MethodGet {
			r.methods[fasthttp.MethodHead] = d.ep
		}
	}
	for _, r := range routes {
		ms := make([]string, 0, len(r.methods))
		for m := range r.methods {
			ms = append(ms, m)
		}
		sort.Strings(ms)
		r.allow = strings.Join(ms, ", ")
	}
	return routes
}

// match finds the route of rawPath (the path as sent, still escaped, so a
// task id may contain an escaped '/'). It returns nil when none matches,
// and an ErrBadRequest when a parameter segment does not unescape.
func match(routes []*route, rawPath string) (*route, params, error) {
	var p params
	if !strings.HasPrefix(rawPath, "/") {
		return nil, p, nil
	}
	segs := strings.Split(rawPath[1:], "/")
next:
	for _, r := range routes {
		if len(r.segs) != len(segs) {
			continue
		}
		for i, want := range r.segs {
			if !isParam(want) && want != segs[i] {
				continue next
			}
		}
		for i, want := range r.segs {
			if !isParam(want) {
				continue
			}
			v, err := url.PathUnescape(segs[i])
			if err != nil {
				return r, p, fmt.Errorf("%w: path parameter %s is not properly escaped", ErrBadRequest, want)
			}
			switch want {
			case "{id}":
				p.id = v
			case "{sid}":
				p.sid = v
			case "{key}":
				p.key = v
			}
		}
		return r, p, nil
	}
	return nil, p, nil
}

func isParam(seg string) bool {
	return strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}")
}
