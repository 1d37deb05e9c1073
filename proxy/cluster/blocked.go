package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/fencepost/fencepost/fence/api"
)

// ReportBlocked tells the cluster of writes for taskID the sidecar
// blocked itself (POST PathTaskBlocked), for the task's history. It is
// one attempt (modeOnce): the cluster does not de-duplicate reports, and
// a lost report costs a line on a timeline, never a lease. A cluster of
// an earlier release, which has no such route, answers 404 not_found;
// that is returned wrapping errors.ErrUnsupported so the caller stops
// asking.
func (c *Client) ReportBlocked(ctx context.Context, taskID string, r api.BlockedReport) error {
	err := c.do(ctx, request{method: http.MethodPost, path: taskPath(api.PathTaskBlocked, taskID), body: r, mode: modeOnce})
	var ce *Error
	if errors.As(err, &ce) && ce.Status == http.StatusNotFound && ce.Problem.Code == api.CodeNotFound {
		return fmt.Errorf("%w: %w", errors.ErrUnsupported, err)
	}
	return err
}
