package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/raftstore"
)

// HistoryReader is the optional Store method set behind GET
// PathTaskHistory and GET PathEvents (reader role and up). Like
// SessionWatcher it is separate from Store: the history is a view for
// people (the console), not part of the lease contract, and a store
// without it answers 404.
type HistoryReader interface {
	TaskHistory(ctx context.Context, taskID string) (api.TaskHistory, error)
	WatchEvents(ctx context.Context, since uint64, d time.Duration) (api.EventFeed, error)
}

// BlockReporter is the optional Store method behind POST PathTaskBlocked
// (sidecar role): a sidecar's report of writes it blocked itself. The
// store checks the caller opened the report's session and that the
// session held the lease at its epoch; a store without it answers 404,
// which a sidecar takes as "this cluster keeps no such reports".
type BlockReporter interface {
	ReportBlocked(ctx context.Context, taskID string, r api.BlockedReport) error
}

// The real store serves the history and takes block reports.
var (
	_ HistoryReader = (*raftstore.Store)(nil)
	_ BlockReporter = (*raftstore.Store)(nil)
)

func (s *Server) reportBlocked(c *call) (int, any, error) {
	var req api.BlockedReport
	if err := c.decode(&req); err != nil {
		return 0, nil, err
	}
	if err := requireIDs("task id", c.p.id, "sessionId", req.SessionID); err != nil {
		return 0, nil, err
	}
	r, ok := s.store.(BlockReporter)
	if !ok {
		return 0, nil, fmt.Errorf("%w: this store keeps no block reports", ErrNoRoute)
	}
	return http.StatusNoContent, nil, r.ReportBlocked(c.ctx, c.p.id, req)
}

func (s *Server) historyReader() (HistoryReader, error) {
	h, ok := s.store.(HistoryReader)
	if !ok {
		return nil, fmt.Errorf("%w: this store keeps no history", ErrNoRoute)
	}
	return h, nil
}

func (s *Server) taskHistory(c *call) (int, any, error) {
	if err := c.noBody(); err != nil {
		return 0, nil, err
	}
	if err := requireIDs("task id", c.p.id); err != nil {
		return 0, nil, err
	}
	h, err := s.historyReader()
	if err != nil {
		return 0, nil, err
	}
	out, err := h.TaskHistory(c.ctx, c.p.id)
	return http.StatusOK, out, err
}

func (s *Server) events(c *call) (int, any, error) {
	if err := c.noBody(); err != nil {
		return 0, nil, err
	}
	h, err := s.historyReader()
	if err != nil {
		return 0, nil, err
	}
	var since uint64
	if v := c.query[api.QueryWatchSince]; v != "" {
		if since, err = strconv.ParseUint(v, 10, 64); err != nil {
			return 0, nil, fmt.Errorf("%w: %s must be a non-negative integer", ErrBadRequest, api.QueryWatchSince)
		}
	}
	var wait time.Duration
	if v := c.query[api.QueryWatchTimeout]; v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return 0, nil, fmt.Errorf("%w: %s must be a non-negative integer", ErrBadRequest, api.QueryWatchTimeout)
		}
		wait = time.Duration(n) * time.Millisecond
	}
	out, err := h.WatchEvents(c.ctx, since, wait)
	return http.StatusOK, out, err
}

// SessionLister is the optional Store method behind GET PathSessions.
type SessionLister interface {
	Sessions(ctx context.Context, after string, limit int, stale bool) (api.SessionList, error)
}

var _ SessionLister = (*raftstore.Store)(nil)

func (s *Server) listSessions(c *call) (int, any, error) {
	if err := c.noBody(); err != nil {
		return 0, nil, err
	}
	l, ok := s.store.(SessionLister)
	if !ok {
		return 0, nil, fmt.Errorf("%w: this store does not list sessions", ErrNoRoute)
	}
	stale, err := parseStale(c.query)
	if err != nil {
		return 0, nil, err
	}
	// The same after/limit rules as the task list.
	f, err := parseTaskFilter(map[string]string{"after": c.query["after"], "limit": c.query["limit"]})
	if err != nil {
		return 0, nil, err
	}
	out, err := l.Sessions(c.ctx, f.After, f.Limit, stale)
	return http.StatusOK, out, err
}
