package control

import (
	"bufio"
	"context"
	"fmt"
	"net"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/eventstream"
	"github.com/fencepost/fencepost/proxy/reply"
	"github.com/fencepost/fencepost/proxy/workertie"
)

// The event stream and the worker's lifetime tie (DESIGN.md 17; package
// eventstream has the contract). Both routes take the connection over
// from the server, so the sidecar reads it and sees a client's close — a
// dead worker's FIN or RST — at once rather than at the next keepalive.
// Who may call them: the worker beside the sidecar, as every control
// route (controlGuard: loopback, same origin).

// stream serves GET /v1/events (attach false) and GET /v1/attach.
func (c *API) stream(attach bool) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if ctx.IsHead() {
			ctx.SetContentType("text/event-stream")
			return
		}
		task := string(ctx.QueryArgs().Peek("task"))
		sub := c.keeper.Stream(string(ctx.Request.Header.Peek("Last-Event-ID")), task)
		var x *workertie.Attachment
		if attach {
			x = c.cfg.Attachments.Open(task)
			for _, l := range c.keeper.Held() {
				x.Saw(workertie.Lease{Task: l.TaskID, Epoch: l.Epoch})
			}
			c.keeper.WorkerAttached()
		}
		ctx.HijackSetNoResponse(true)
		ctx.Hijack(func(conn net.Conn) {
			defer sub.Close()
			w := bufio.NewWriter(conn)
			var err error
			if _, err = w.WriteString(eventstream.ResponseHead); err == nil {
				var seen func(eventstream.Event)
				if x != nil {
					seen = func(ev eventstream.Event) {
						switch {
						case ev.Stop:
							x.Stopped(ev.TaskID)
						case ev.Kind == eventstream.KindAcquired || ev.Kind == eventstream.KindState:
							x.Saw(workertie.Lease{Task: ev.TaskID, Epoch: ev.Epoch})
						}
					}
				}
				gone := eventstream.WatchClose(conn)
				err = eventstream.Serve(context.Background(), w, sub, gone, eventstream.KeepAlive, seen)
				// The watcher reads conn: fasthttp recycles the hijacked
				// conn once this handler returns, so it must end first.
				_ = conn.Close()
				<-gone
			}
			if x == nil {
				return
			}
			if err == nil {
				// The sidecar ended the stream (shutdown, or the client fell
				// behind and reconnects): not the worker's exit.
				x.Forget()
				return
			}
			gctx, cancel := context.WithTimeout(context.Background(), c.cfg.ClusterTimeout)
			defer cancel()
			c.logGiven(x.Close(gctx))
		})
	}
}

// ProgressRequest is the body of POST /v1/progress. TaskID may be omitted
// when one lease is held.
type ProgressRequest struct {
	TaskID string `json:"taskId,omitempty"`
}

// progress serves POST /v1/progress: a progress mark, carried to the
// cluster by the next heartbeat (no raft write of its own); 204, or 409
// when the lease is not current.
func (c *API) progress(ctx *fasthttp.RequestCtx) {
	var req ProgressRequest
	if !decode(ctx, &req) {
		return
	}
	task, epoch, err := c.keeper.Resolve(req.TaskID)
	if err != nil {
		c.controlError(ctx, task, 0, err)
		return
	}
	if _, why := c.keeper.MarkProgress(task); why != "" {
		info, _ := lease.LookupError(lease.ErrLeaseNotActive)
		reply.Problem(ctx, info.Code, "lease not current: progress not recorded",
			fmt.Sprintf("the lease on task %q is not current (%s)", task, why), epoch)
		return
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// logGiven logs the leases an attach stream's close gave back.
func (c *API) logGiven(given []workertie.Lease, err error) {
	if len(given) == 0 && err == nil {
		return
	}
	tasks := make([]string, len(given))
	for i, l := range given {
		tasks[i] = l.Task
	}
	c.log.Info("attach stream closed without a release: the worker's leases given back",
		zap.String("reason", lease.ReasonWorkerExited), zap.Strings("tasks", tasks), zap.Error(err))
}
