package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/fencepost/fencepost/fence/api"
)

// SessionWatcher is the optional Store method behind GET /v1/sessions/{sid}/watch.
// It is separate from Store because a watch is a latency optimisation, not
// part of the lease contract: a store without it answers 404 and sidecars
// fall back to learning of changes at their next heartbeat.
type SessionWatcher interface {
	WatchSession(ctx context.Context, sid string, since uint64, d time.Duration) (uint64, error)
}

func (s *Server) watch(c *call) (int, any, error) {
	if err := c.noBody(); err != nil {
		return 0, nil, err
	}
	if err := requireIDs("session id", c.p.sid); err != nil {
		return 0, nil, err
	}
	w, ok := s.store.(SessionWatcher)
	if !ok {
		return 0, nil, fmt.Errorf("%w: this store does not support watches", ErrNoRoute)
	}
	var since uint64
	if v := c.query[api.QueryWatchSince]; v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, nil, fmt.Errorf("%w: %s must be a non-negative integer", ErrBadRequest, api.QueryWatchSince)
		}
		since = n
	}
	var wait time.Duration
	if v := c.query[api.QueryWatchTimeout]; v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return 0, nil, fmt.Errorf("%w: %s must be a non-negative integer", ErrBadRequest, api.QueryWatchTimeout)
		}
		wait = time.Duration(n) * time.Millisecond
	}
	v, err := w.WatchSession(c.ctx, c.p.sid, since, wait)
	return http.StatusOK, api.WatchResponse{Version: v}, err
}
