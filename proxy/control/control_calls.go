package control

import (
	"context"
	"encoding/json"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/reply"
)

func (c *API) health(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/plain")
	ctx.SetBodyString("ok\n")
}

func (c *API) readyz(ctx *fasthttp.RequestCtx) {
	ok, why := c.ready()
	if !ok {
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
	}
	ctx.SetContentType("text/plain")
	ctx.SetBodyString(why + "\n")
}

func (c *API) lease(ctx *fasthttp.RequestCtx) {
	v := c.keeper.Views()
	if t := string(ctx.QueryArgs().Peek("taskId")); t != "" {
		var only []leases.View
		for _, x := range v {
			if x.TaskID == t {
				only = append(only, x)
			}
		}
		v = only
	}
	if v == nil {
		v = []leases.View{}
	}
	reply.JSON(ctx, LeaseReply{Leases: v})
}

func (c *API) acquire(ctx *fasthttp.RequestCtx) {
	var req AcquireRequest
	if !decode(ctx, &req) {
		return
	}
	if req.TaskID == "" {
		reply.Problem(ctx, reply.CodeBadRequest, "taskId is required", `field "taskId": required`, 0)
		return
	}
	c.grant(ctx, req.TaskID, false, api.AcquireRequest{Create: req.Create, Profile: req.Profile, Priority: req.Priority})
}

func (c *API) claim(ctx *fasthttp.RequestCtx) {
	var req struct{}
	if decode(ctx, &req) {
		c.grant(ctx, "", true, api.AcquireRequest{})
	}
}

func (c *API) grant(ctx *fasthttp.RequestCtx, taskID string, claim bool, req api.AcquireRequest) {
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	g, err := c.keeper.Acquire(cctx, taskID, claim, req)
	if err != nil {
		c.controlError(ctx, "", 0, err)
		return
	}
	id := g.Lease.TaskID
	if id == "" {
		id = g.Task.ID
	}
	out := GrantReply{Task: g.Task, InDoubt: g.InDoubt}
	if cp := g.Task.Checkpoint; cp != nil {
		out.CheckpointData = jsonData(cp.Data)
	}
	for _, v := range c.keeper.Views() {
		if v.TaskID == id {
			out.Lease = v
		}
	}
	reply.JSON(ctx, out)
}

func (c *API) checkpoint(ctx *fasthttp.RequestCtx) {
	var req CheckpointRequest
	if !decode(ctx, &req) {
		return
	}
	task, epoch, err := c.keeper.Resolve(req.TaskID)
	if err != nil {
		c.controlError(ctx, task, 0, err)
		return
	}
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	t, err := c.keeper.ClusterFor(task).Checkpoint(cctx, task, api.CheckpointRequest{
		SessionID: c.keeper.SessionFor(task), Epoch: epoch, Seq: req.Seq, Step: req.Step, Data: req.Data,
	})
	if err != nil {
		c.controlError(ctx, task, epoch, err)
		return
	}
	out := CheckpointReply{Task: t}
	if t != nil && t.Checkpoint != nil {
		c.keeper.Checkpointed(task, epoch, t.Checkpoint.Seq, t.Checkpoint.Step)
		out.CheckpointData = jsonData(t.Checkpoint.Data)
	}
	reply.JSON(ctx, out)
}

// jsonData is checkpoint data as the JSON value it was stored as, or nil
// when it is none (empty, or bytes that are not JSON).
func jsonData(b []byte) json.RawMessage {
	if len(b) > 0 && json.Valid(b) {
		return b
	}
	return nil
}

func (c *API) wait(ctx *fasthttp.RequestCtx) {
	var req WaitRequest
	if !decode(ctx, &req) {
		return
	}
	c.end(ctx, req.TaskID, leases.ReasonWaiting, "waiting", func(cctx context.Context, task, sid string, epoch uint64) (*lease.Task, error) {
		return c.keeper.ClusterFor(task).Wait(cctx, task, api.WaitRequest{SessionID: sid, Epoch: epoch, TimeoutMs: req.TimeoutMs, Reason: req.Reason})
	})
}

// release ends the lease with outcome out.
func (c *API) release(out lease.Outcome) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		var req ReleaseRequest
		if !decode(ctx, &req) {
			return
		}
		c.end(ctx, req.TaskID, leases.ReasonReleased, string(out), func(cctx context.Context, task, sid string, epoch uint64) (*lease.Task, error) {
			return c.keeper.ClusterFor(task).Release(cctx, task, api.ReleaseRequest{SessionID: sid, Epoch: epoch, Outcome: out, Result: req.Result, Reason: req.Reason})
		})
	}
}

// end runs the worker's call that ends a lease (a wait or a release).
// Writes are blocked before the call commits: after it nobody may write
// under the epoch, so a write racing the call must not slip out. A failed
// call makes the lease current again; a successful one drops it.
func (c *API) end(ctx *fasthttp.RequestCtx, taskID string, r leases.Reason, why string,
	call func(cctx context.Context, task, sid string, epoch uint64) (*lease.Task, error)) {
	task, epoch, err := c.keeper.Resolve(taskID)
	if err != nil {
		c.controlError(ctx, task, 0, err)
		return
	}
	c.keeper.Hold(task, epoch, r)
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	t, err := call(cctx, task, c.keeper.SessionFor(task), epoch)
	if err != nil {
		c.keeper.Unhold(task, epoch)
		c.controlError(ctx, task, epoch, err)
		return
	}
	c.keeper.Drop(task, epoch, r, leases.EventReleased, why)
	reply.JSON(ctx, t)
}
