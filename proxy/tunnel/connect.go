package tunnel

import (
	"io"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/proxy/conns"
	"github.com/fencepost/fencepost/proxy/leases"
	"github.com/fencepost/fencepost/proxy/reply"
	"github.com/fencepost/fencepost/proxy/request"
)

// connect serves CONNECT. The sidecar cannot see inside a tunnel, so it
// cannot stamp or block individual writes: tunnels go only to
// allow-listed targets, only while the request's lease is current, and
// every tunnel of a lease is closed the moment the lease stops being
// current.
func (tn *Tunnels) connect(ctx *fasthttp.RequestCtx) {
	raw := string(ctx.Request.Header.RequestURI())
	host, port, err := request.SplitAuthority(raw)
	if err != nil || port == "" {
		tn.req.Refuse(ctx, &reply.Reply{Code: reply.CodeBadRequest, Title: "bad CONNECT target",
			Detail: "CONNECT needs host:port, got " + reply.Quote(raw)})
		return
	}
	hp := net.JoinHostPort(host, port)
	if e := tn.req.RefuseSelfTarget(host, port); e != nil {
		tn.req.Refuse(ctx, e)
		return
	}
	if tn.fencedTunnel(host, port, hp) {
		tn.openFencedTunnel(ctx, host, port)
		return
	}
	if !tn.allow[hp] {
		tn.refuseConnect(ctx, host, port, hp)
		return
	}
	task, serr := request.TaskOf(&ctx.Request.Header)
	if serr != nil {
		tn.req.Refuse(ctx, &reply.Reply{Code: reply.CodeBadRequest, Title: "bad task selection", Detail: serr.Error()})
		return
	}
	t, untrack, blocked, err := tn.openBlind(task, hp, conns.DialTarget(hp))
	if blocked != nil {
		tn.req.Refuse(ctx, blocked)
		return
	}
	if err != nil {
		tn.req.Count(request.DecisionForwarded)
		reply.Problem(ctx, reply.CodeUpstreamError, "cannot reach CONNECT target", err.Error(), 0)
		return
	}
	tn.running.Add(1)
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		defer tn.running.Done()
		defer untrack()
		defer t.Close()
		if !t.attach(c) {
			return
		}
		_ = c.SetDeadline(time.Time{})
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
			return
		}
		t.pipe(c)
	})
}

// openBlind opens a blind tunnel to hp (dialled at dial) for task: only
// while the task's lease is current (blocked otherwise), registered with
// the lease's ticket so the lease's end cuts it; untrack unregisters it.
// A CONNECT to an allow-listed target and a captured connection the
// sidecar cannot read (capture.other_tcp) share it.
func (tn *Tunnels) openBlind(task, hp, dial string) (t *tunnel, untrack func(), blocked *reply.Reply, err error) {
	l, why := tn.leases.Check(task)
	if why != "" {
		return nil, nil, tn.req.Blocked(why, l, task, true), nil
	}
	up, err := net.DialTimeout("tcp", dial, tn.cfg.DialTimeout)
	if err != nil {
		return nil, nil, nil, err
	}
	t = &tunnel{up: up}
	if !l.Ticket.Track(t, true) {
		_ = up.Close()
		return nil, nil, tn.req.Blocked(leases.ReasonExpired, l, task, true), nil
	}
	tn.req.Count(request.DecisionForwarded)
	tn.tunnels.WithLabelValues(tunnelBlind).Inc()
	if ce := tn.log.Check(zap.InfoLevel, "tunnel open"); ce != nil {
		ce.Write(zap.String("target", hp), zap.Uint64("epoch", l.Epoch))
	}
	tk := l.Ticket
	return t, func() { tk.Untrack(t) }, nil, nil
}

// tunnel is one CONNECT tunnel; Close closes both sides once.
type tunnel struct {
	up     net.Conn
	mu     sync.Mutex
	client net.Conn
	closed bool
}

// attach sets the worker side; false when the tunnel was cut meanwhile.
func (t *tunnel) attach(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.client = c
	return true
}

func (t *tunnel) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	c := t.client
	t.mu.Unlock()
	if c != nil {
		// fasthttp's hijacked conn ignores Close (the server closes it when
		// the hijack handler returns); close the real connection so a
		// reader blocked on it wakes up now.
		if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok {
			_ = u.UnsafeConn().Close()
		}
		_ = c.Close()
	}
	return t.up.Close()
}

// pipe copies both ways until either side ends, then closes both.
func (t *tunnel) pipe(c net.Conn) {
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(t.up, c)
		_ = t.Close()
		close(done)
	}()
	_, _ = io.Copy(c, t.up)
	_ = t.Close()
	<-done
}
