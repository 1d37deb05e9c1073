package proxy

import (
	"io"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
)

// connect serves CONNECT. The sidecar cannot see inside a tunnel, so it
// cannot stamp or block individual writes: tunnels go only to
// allow-listed targets, only while the request's lease is current, and
// every tunnel of a lease is closed the moment the lease stops being
// current.
func (p *Pipeline) connect(ctx *fasthttp.RequestCtx) {
	raw := string(ctx.Request.Header.RequestURI())
	host, port, err := SplitAuthority(raw)
	if err != nil || port == "" {
		p.Refuse(ctx, &Reply{Status: 400, Code: CodeBadRequest, Title: "bad CONNECT target",
			Detail: "CONNECT needs host:port, got " + Quote(raw)})
		return
	}
	hp := net.JoinHostPort(host, port)
	if e := p.RefuseSelfTarget(host, port); e != nil {
		p.Refuse(ctx, e)
		return
	}
	if p.fencedTunnel(host, port, hp) {
		p.openFencedTunnel(ctx, host, port)
		return
	}
	if !p.allow[hp] {
		p.refuseConnect(ctx, host, port, hp)
		return
	}
	scan := scanRequest(&ctx.Request.Header)
	task, serr := selectedTask(&scan)
	if serr != nil {
		p.Refuse(ctx, &Reply{Status: 400, Code: CodeBadRequest, Title: "bad task selection", Detail: serr.Error()})
		return
	}
	l, why := p.keeper.Check(task)
	if why != "" {
		p.Refuse(ctx, p.Blocked(why, l, task, true))
		return
	}
	up, err := net.DialTimeout("tcp", DialTarget(hp), p.cfg.DialTimeout)
	if err != nil {
		p.metrics.forwarded.Inc()
		Problem(ctx, fasthttp.StatusBadGateway, CodeUpstreamError, "cannot reach CONNECT target", err.Error(), 0)
		return
	}
	t := &tunnel{up: up}
	if !l.Ticket.st.track(l.Ticket.gen, t, true) {
		_ = up.Close()
		p.Refuse(ctx, p.Blocked(ReasonExpired, l, task, true))
		return
	}
	p.metrics.forwarded.Inc()
	p.metrics.tunnels.WithLabelValues(tunnelBlind).Inc()
	if ce := p.log.Check(zap.InfoLevel, "tunnel open"); ce != nil {
		ce.Write(zap.String("target", hp), zap.Uint64("epoch", l.Epoch))
	}
	st := l.Ticket.st
	p.tunnels.Add(1)
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		defer p.tunnels.Done()
		defer st.untrack(t)
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

// Quote quotes at most 100 bytes of untrusted input for a message.
func Quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x20 && c < 0x7f && c != '"' {
			b = append(b, c)
		} else {
			b = append(b, '?')
		}
	}
	return string(append(b, '"'))
}
