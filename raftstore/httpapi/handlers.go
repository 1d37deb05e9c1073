package httpapi

import (
	"context"
	"net/http"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
)

// The handlers below decode and check a request, call the Store once and
// return what to answer. They never write the response themselves: the
// server does, so forwarding, problems, metrics and logging stay in one
// place.

func (s *Server) openSession(c *call) (int, any, error) {
	var req api.OpenSessionRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	if err := checkID("sessionId", req.SessionID, true); err != nil {
		return 0, nil, err
	}
	if err := requireIDs("workerId", req.WorkerID); err != nil {
		return 0, nil, err
	}
	if err := c.who.checkWorker(req.WorkerID); err != nil {
		return 0, nil, err
	}
	sess, err := s.store.OpenSession(c.ctx, c.rid, req)
	return http.StatusCreated, sess, err
}

func (s *Server) closeSession(c *call) (int, any, error) {
	if err := c.noBody(); err != nil {
		return 0, nil, err
	}
	if err := requireIDs("session id", c.p.sid); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, s.store.CloseSession(c.ctx, c.rid, c.p.sid)
}

func (s *Server) heartbeat(c *call) (int, any, error) {
	resp, err := s.beat(c.ctx, c.p.sid, c.rc.PostBody())
	return http.StatusOK, resp, err
}

// beat decodes, checks and runs one heartbeat, unary or streamed: the one
// place a heartbeat's body is judged. ctx carries the caller.
func (s *Server) beat(ctx context.Context, sid string, body []byte) (api.HeartbeatResponse, error) {
	req, err := decodeHeartbeat(body)
	if err != nil {
		return api.HeartbeatResponse{}, err
	}
	if err := requireIDs("session id", sid); err != nil {
		return api.HeartbeatResponse{}, err
	}
	for _, l := range req.Leases {
		if err := requireIDs("leases[].taskId", l.TaskID); err != nil {
			return api.HeartbeatResponse{}, err
		}
	}
	return s.store.Heartbeat(ctx, sid, req)
}

func (s *Server) createTask(c *call) (int, any, error) {
	var req api.CreateTaskRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	if err := requireIDs("taskId", req.TaskID); err != nil {
		return 0, nil, err
	}
	if err := checkID("profile", req.Profile, true); err != nil {
		return 0, nil, err
	}
	t, err := s.store.CreateTask(c.ctx, c.rid, req)
	return http.StatusCreated, brief(t), err
}

func (s *Server) listTasks(c *call) (int, any, error) {
	f, err := parseTaskFilter(c.query)
	if err != nil {
		return 0, nil, err
	}
	stale, err := parseStale(c.query)
	if err != nil {
		return 0, nil, err
	}
	bodies, err := wantBodies(c)
	if err != nil {
		return 0, nil, err
	}
	list, err := s.store.Tasks(c.ctx, f, stale)
	if err != nil {
		return 0, nil, err
	}
	if list.Tasks == nil {
		list.Tasks = []*lease.Task{} // "tasks": [] rather than null
	}
	if !bodies {
		for _, t := range list.Tasks {
			withoutBodies(t)
		}
	}
	return http.StatusOK, list, boundList(&list, s.cfg.MaxListBytes)
}

func (s *Server) getTask(c *call) (int, any, error) {
	stale, err := parseStale(c.query)
	if err != nil {
		return 0, nil, err
	}
	if err := requireIDs("task id", c.p.id); err != nil {
		return 0, nil, err
	}
	bodies, err := wantBodies(c)
	if err != nil {
		return 0, nil, err
	}
	t, err := s.store.Task(c.ctx, c.p.id, stale)
	if err == nil && !bodies {
		withoutBodies(t)
	}
	return http.StatusOK, t, err
}

func (s *Server) deleteTask(c *call) (int, any, error) {
	if err := c.noBody(); err != nil {
		return 0, nil, err
	}
	if err := requireIDs("task id", c.p.id); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, s.store.DeleteTask(c.ctx, c.rid, c.p.id)
}

func (s *Server) acquire(c *call) (int, any, error) {
	var req api.AcquireRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	if err := requireIDs("task id", c.p.id, "sessionId", req.SessionID); err != nil {
		return 0, nil, err
	}
	if err := checkID("profile", req.Profile, true); err != nil {
		return 0, nil, err
	}
	g, err := s.store.Acquire(c.ctx, c.rid, c.p.id, req)
	annotateGrant(c, g, err)
	return http.StatusOK, briefGrant(g), err
}

func (s *Server) claim(c *call) (int, any, error) {
	var req api.ClaimRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	if err := requireIDs("sessionId", req.SessionID); err != nil {
		return 0, nil, err
	}
	g, err := s.store.Claim(c.ctx, c.rid, req)
	annotateGrant(c, g, err)
	return http.StatusOK, briefGrant(g), err
}

func (s *Server) checkpoint(c *call) (int, any, error) {
	req, err := decodeCheckpoint(c.rc.PostBody())
	if err != nil {
		return 0, nil, err
	}
	if err := requireIDs("task id", c.p.id, "sessionId", req.SessionID); err != nil {
		return 0, nil, err
	}
	t, err := s.store.Checkpoint(c.ctx, c.rid, c.p.id, req)
	return http.StatusOK, brief(t), err
}

func (s *Server) wait(c *call) (int, any, error) {
	var req api.WaitRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	if err := requireIDs("task id", c.p.id, "sessionId", req.SessionID); err != nil {
		return 0, nil, err
	}
	t, err := s.store.Wait(c.ctx, c.rid, c.p.id, req)
	return http.StatusOK, brief(t), err
}

func (s *Server) signal(c *call) (int, any, error) {
	var req api.SignalRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	if err := requireIDs("task id", c.p.id); err != nil {
		return 0, nil, err
	}
	t, err := s.store.Signal(c.ctx, c.rid, c.p.id, req)
	return http.StatusOK, brief(t), err
}

func (s *Server) release(c *call) (int, any, error) {
	var req api.ReleaseRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	if err := requireIDs("task id", c.p.id, "sessionId", req.SessionID); err != nil {
		return 0, nil, err
	}
	t, err := s.store.Release(c.ctx, c.rid, c.p.id, req)
	annotateTask(c, c.p.id, req.Epoch, t)
	return http.StatusOK, brief(t), err
}

func (s *Server) revoke(c *call) (int, any, error) {
	var req api.RevokeRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	if err := requireIDs("task id", c.p.id); err != nil {
		return 0, nil, err
	}
	t, err := s.store.Revoke(c.ctx, c.rid, c.p.id, req)
	annotateTask(c, c.p.id, req.Epoch, t)
	return http.StatusOK, brief(t), err
}

func (s *Server) cancel(c *call) (int, any, error) {
	var req api.CancelRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	if err := requireIDs("task id", c.p.id); err != nil {
		return 0, nil, err
	}
	t, err := s.store.Cancel(c.ctx, c.rid, c.p.id, req)
	return http.StatusOK, brief(t), err
}

func (s *Server) intent(c *call) (int, any, error) {
	var req api.IntentRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	if err := requireIDs("task id", c.p.id, "sessionId", req.SessionID, "key", req.Key); err != nil {
		return 0, nil, err
	}
	resp, err := s.store.Intent(c.ctx, c.rid, c.p.id, req)
	return http.StatusOK, resp, err
}

func (s *Server) outcome(c *call) (int, any, error) {
	var req api.OutcomeRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	if err := requireIDs("task id", c.p.id, "key", c.p.key); err != nil {
		return 0, nil, err
	}
	e, err := s.store.Outcome(c.ctx, c.rid, c.p.id, c.p.key, req)
	return http.StatusOK, e, err
}

func (s *Server) leases(c *call) (int, any, error) {
	stale, err := parseStale(c.query)
	if err != nil {
		return 0, nil, err
	}
	// The same ?after= and ?limit= as GET /v1/tasks, with the same rules.
	f, err := parseTaskFilter(map[string]string{"after": c.query["after"], "limit": c.query["limit"]})
	if err != nil {
		return 0, nil, err
	}
	list, err := s.store.Leases(c.ctx, api.LeasePage{After: f.After, Limit: f.Limit}, stale)
	if list.Leases == nil {
		list.Leases = []lease.Lease{}
	}
	return http.StatusOK, list, err
}

func (s *Server) keys(*call) (int, any, error) {
	keys := s.store.Keys()
	if keys.Keys == nil {
		keys.Keys = []api.PublicKey{}
	}
	return http.StatusOK, keys, nil
}

func (s *Server) status(*call) (int, any, error) {
	return http.StatusOK, s.store.Status(), nil
}

func (s *Server) join(c *call) (int, any, error) {
	var req api.JoinRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	if err := requireIDs("id", req.ID, "raftAddr", req.RaftAddr); err != nil {
		return 0, nil, err
	}
	if err := checkID("httpAddr", req.HTTPAddr, true); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, s.store.Join(c.ctx, req)
}

func (s *Server) remove(c *call) (int, any, error) {
	var req api.RemoveRequest
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	if err := requireIDs("id", req.ID); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, s.store.Remove(c.ctx, req.ID)
}

// brief is the task a mutation replies with: everything but the lease
// history and the write journal, which GET /v1/tasks/{id} serves. A
// caller of acquire, checkpoint or release needs the task's state, lease,
// checkpoint and payload; shipping up to 16 past leases and every
// journaled response body on each write was most of the leader's CPU in
// the acquire benchmark (encoding/json, issue 6).
func brief(t *lease.Task) *lease.Task {
	if t == nil || (t.History() == nil && t.Journal() == nil) {
		return t
	}
	c := *t
	c.DropPast()
	return &c
}

// briefGrant trims the grant's task the same way; the effects an earlier
// owner left in doubt stay in Grant.InDoubt.
func briefGrant(g api.Grant) api.Grant {
	g.Task.DropPast()
	return g
}
