package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/raftstore"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
)

// The heartbeat stream (fence/api/hbstream.go, DESIGN.md 4.4). The upgrade
// request passes serve's identify, authorize (PermSession), refusal and
// rate-limit checks like any request; once upgraded, every beat passes the
// rate limit, the refusal limiter and the store's owner check again and
// each refusal is audited, so a stream grants its opener nothing a unary
// heartbeat would not. A follower relays each beat to the leader as a
// unary heartbeat (toLeader) and names the leader in the reply, so the
// client can re-home its stream; a client whose only reachable member is
// a follower keeps its leases.

// maxStreamInflight bounds the beats of one stream being served at once;
// the reader stops reading past it, so a client cannot queue unbounded
// work on the member.
const maxStreamInflight = 256

// streamBufSize is the read and write buffer of a stream connection.
const streamBufSize = 16 << 10

// hbStream is one upgraded connection.
type hbStream struct {
	conn net.Conn
	// raw is the connection under fasthttp's hijack wrapper, whose Close
	// does nothing (fasthttp closes it when runStream returns): closing
	// raw is how Close and a failed write end the stream.
	raw    net.Conn
	who    principal
	remote net.Addr
	// refusalKey is the caller's key in the refusal limiter (refusals.go).
	refusalKey string
	ctx        context.Context // carries the stream's caller (raftstore.WithCaller)
	cancel     context.CancelFunc
	// out carries encoded reply frames (from frameBufs) to the writer,
	// which returns each to the pool once it is in the write buffer.
	out chan *[]byte
	// unanswered counts the beats read whose reply the writer has not
	// taken yet: while some are, a reply is not flushed alone before the
	// others of its verify round had a chance to join it.
	unanswered atomic.Int64
	// deadlines gives each beat its deadline context (stream_deadline.go).
	deadlines beatDeadlines
}

// streamWork is one beat handed to a stream's worker, with its session
// id as a string.
type streamWork struct {
	api.Beat
	sid string
}

// frameBufs holds reply frame buffers: a frame per beat is the stream's
// only per-beat buffer, so it is reused instead of allocated.
var frameBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// openStream answers an upgrade to the heartbeat stream: 101, then the
// connection is hijacked and served by runStream.
func (s *Server) openStream(rc *fasthttp.RequestCtx, who principal) error {
	if !rc.Request.Header.ConnectionUpgrade() ||
		!strings.EqualFold(string(rc.Request.Header.Peek("Upgrade")), api.HeartbeatStreamProtocol) {
		return fmt.Errorf("%w: %s needs the headers Connection: Upgrade and Upgrade: %s", ErrBadRequest,
			api.PathHeartbeatStream, api.HeartbeatStreamProtocol)
	}
	if len(rc.PostBody()) > 0 {
		return fmt.Errorf("%w: %s takes no body; beats follow the upgrade", ErrBadRequest, api.PathHeartbeatStream)
	}
	key := refusalKey(rc, who)
	rc.Response.Header.Set("Upgrade", api.HeartbeatStreamProtocol)
	rc.Response.Header.Set("Connection", "Upgrade")
	rc.SetStatusCode(http.StatusSwitchingProtocols)
	rc.Hijack(func(c net.Conn) { s.runStream(c, who, key) })
	return nil
}

// trackStream registers st so Close can end it; false when the server is
// closing (the stream is not served).
func (s *Server) trackStream(st *hbStream) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streamsClosed {
		return false
	}
	if s.streams == nil {
		s.streams = map[*hbStream]struct{}{}
	}
	s.streams[st] = struct{}{}
	s.streamWG.Add(1)
	return true
}

func (s *Server) untrackStream(st *hbStream) {
	s.mu.Lock()
	delete(s.streams, st)
	s.mu.Unlock()
	s.streamWG.Done()
}

// closeStreams ends every stream and waits for their goroutines: fasthttp's
// shutdown does not wait for hijacked connections.
func (s *Server) closeStreams() {
	s.mu.Lock()
	s.streamsClosed = true
	for st := range s.streams {
		st.cancel()
		_ = st.raw.Close()
	}
	s.mu.Unlock()
	s.streamWG.Wait()
}

// runStream serves one stream until the client closes it, a frame is
// malformed, the connection fails or the server closes. Every beat read is
// answered before the stream ends, unless the connection itself failed.
func (s *Server) runStream(conn net.Conn, who principal, key string) {
	ctx, cancel := context.WithCancel(context.Background())
	raw := conn
	if u, ok := conn.(interface{ UnsafeConn() net.Conn }); ok {
		raw = u.UnsafeConn()
	}
	// The caller is the stream's for every beat: named once here, not in a
	// context per beat.
	st := &hbStream{conn: conn, raw: raw, who: who, remote: conn.RemoteAddr(), refusalKey: key,
		ctx: raftstore.WithCaller(ctx, who.caller()), cancel: cancel,
		out: make(chan *[]byte, maxStreamInflight)}
	st.deadlines = beatDeadlines{parent: st.ctx, timeout: s.cfg.RequestTimeout}
	defer cancel()
	defer st.deadlines.close()
	if !s.trackStream(st) {
		return
	}
	defer s.untrackStream(st)
	s.metrics.streams.Inc()
	defer s.metrics.streams.Dec()

	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		s.writeStream(st)
	}()
	var (
		workers  sync.WaitGroup
		nworkers int
		sem      = make(chan struct{}, maxStreamInflight)
		// work hands a beat to an idle worker; unbuffered, so a beat
		// is only handed to a worker that is waiting for one.
		work  = make(chan streamWork)
		serve = func(w streamWork) {
			f := frameBufs.Get().(*[]byte)
			*f = s.streamBeat(st, w.Beat, w.sid, (*f)[:0])
			st.out <- f
			<-sem
		}
		br   = bufio.NewReaderSize(conn, streamBufSize)
		hdr  [api.StreamFrameHeader]byte
		slab []byte
		bad  error
		// sid is the last beat's session id as a string: a stream
		// carries one sidecar's session, so it is made once, not per
		// beat.
		sid string
	)
	for {
		// A sidecar beats every few seconds; a stream silent for the
		// idle timeout is abandoned, as an idle keep-alive connection is.
		_ = conn.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			break
		}
		n, err := api.FrameLen(hdr[:])
		if err != nil {
			bad = err
			break
		}
		// Payloads are carved from a shared slab: one allocation per
		// slab rather than per beat. A slab lives while a beat in it is
		// served; nothing keeps a payload past its beat (the decoder
		// and the relay copy what they keep).
		if n > len(slab) {
			slab = make([]byte, max(n, streamBufSize))
		}
		payload := slab[:n:n] // owned by the beat's worker until it answers
		slab = slab[n:]
		if _, err := io.ReadFull(br, payload); err != nil {
			break
		}
		b, err := api.ParseBeat(payload)
		if err != nil {
			bad = err
			break
		}
		if string(b.SessionID) != sid {
			sid = string(b.SessionID)
		}
		w := streamWork{Beat: b, sid: sid}
		sem <- struct{}{}
		st.unanswered.Add(1)
		select {
		case work <- w:
		default:
			if nworkers == maxStreamInflight {
				work <- w // one is about to take the next beat
				continue
			}
			// Every worker is busy: one more joins the stream's pool
			// and stays in it while the stream lives. Workers outlive
			// their beat because a fresh goroutine per beat grew its
			// stack on every beat (runtime.newstack was a twentieth of
			// the leader's heartbeat CPU); a stream keeps as many as
			// its beats ever had in flight at once, one or two for a
			// sidecar.
			nworkers++
			workers.Add(1)
			go func() {
				defer workers.Done()
				serve(w)
				for w := range work {
					serve(w)
				}
			}()
		}
	}
	close(work)
	if bad == nil {
		// The connection is gone: nothing more can be answered.
		cancel()
	}
	workers.Wait()
	if bad != nil {
		s.metrics.streamBadFrames.Inc()
		p := problemFor(fmt.Errorf("%w: %w", ErrBadRequest, bad), api.PathHeartbeatStream)
		body, _ := json.Marshal(p)
		f := api.AppendReply(nil, 0, p.Status, "", body)
		st.unanswered.Add(1)
		st.out <- &f
		if ce := s.log.Check(zap.DebugLevel, "heartbeat stream closed on a malformed frame"); ce != nil {
			ce.Write(zap.Stringer("remote", st.remote), zap.Error(bad))
		}
	}
	close(st.out)
	<-wrote
}

// writeStream writes reply frames as they come, flushing when no other
// reply is waiting: beats answered by one verify round leave in one write.
// The goroutines of one round's beats wake one by one, so when no reply is
// queued but beats are still unanswered the writer yields once before it
// flushes, letting the runnable ones queue theirs: one write syscall then
// carries the round instead of one per beat.
func (s *Server) writeStream(st *hbStream) {
	bw := bufio.NewWriterSize(st.conn, streamBufSize)
	var err error
	batch := false
	for f := range st.out {
		st.unanswered.Add(-1)
		if err != nil {
			frameBufs.Put(f)
			continue // drain, so no beat blocks on a dead connection
		}
		if !batch {
			_ = st.conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
			batch = true
		}
		_, err = bw.Write(*f)
		frameBufs.Put(f)
		if err == nil && len(st.out) == 0 && st.unanswered.Load() > 0 {
			runtime.Gosched()
		}
		if err == nil && len(st.out) == 0 {
			err, batch = bw.Flush(), false
		}
		if err != nil {
			// The reader sees the close and ends the stream.
			_ = st.raw.Close()
		}
	}
	if err == nil {
		_ = bw.Flush()
	}
}

// streamBeat serves one beat of session sid and appends its reply frame
// to dst.
func (s *Server) streamBeat(st *hbStream, b api.Beat, sid string, dst []byte) []byte {
	start := time.Now()
	err := s.refusals.check(st.refusalKey)
	if err == nil {
		err = s.limit(st.who)
	}
	var resp api.HeartbeatResponse
	if err == nil {
		ctx := st.deadlines.acquire(start)
		resp, err = s.beat(ctx, sid, b.Body)
		st.deadlines.release(ctx)
	}
	var frame []byte
	status := http.StatusOK
	switch {
	case err == nil:
		buf := encodeBufs.Get().(*[]byte)
		*buf = appendHeartbeat((*buf)[:0], &resp)
		frame = api.AppendReply(dst, b.ID, status, "", *buf)
		encodeBufs.Put(buf)
	case isNotLeader(err):
		status, frame, err = s.relayBeat(st, b, sid, dst)
	}
	if err != nil {
		var p api.Problem
		p, frame = s.beatProblem(st, b.ID, sid, err, dst)
		status = p.Status
	}
	s.chargeRefusal(st.refusalKey, err)
	s.metrics.observe(api.PathHeartbeatStream, fasthttp.MethodPost, status, time.Since(start))
	return frame
}

// relayBeat sends a beat this follower cannot answer to the leader as a
// unary heartbeat, and returns the leader's answer as a reply frame that
// names the leader.
func (s *Server) relayBeat(st *hbStream, b api.Beat, sid string, dst []byte) (int, []byte, error) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.SetBody(b.Body)
	uri := strings.Replace(api.PathHeartbeat, "{sid}", url.PathEscape(sid), 1)
	leader, err := s.toLeader(req, resp, uri, newRequestID(), st.who)
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode(), api.AppendReply(dst, b.ID, resp.StatusCode(), leader, resp.Body()), nil
}

// beatProblem is the reply frame of a failed beat, audited as a refused
// unary heartbeat would be.
func (s *Server) beatProblem(st *hbStream, id uint64, sid string, err error, dst []byte) (api.Problem, []byte) {
	path := strings.Replace(api.PathHeartbeat, "{sid}", url.PathEscape(sid), 1)
	p := problemFor(err, path)
	if p.Code == api.CodeInternal {
		s.log.Error("streamed heartbeat failed", zap.String("session", sid), zap.Error(err))
	}
	body, merr := json.Marshal(p)
	if merr != nil { // cannot happen: Problem has only plain fields
		body = []byte(`{"code":"internal"}`)
	}
	if isRefusal(err) || errors.Is(err, ErrRateLimited) {
		s.auditCall(context.Background(), st.who, PermSession, auditFacts{method: fasthttp.MethodPost,
			path: []byte(path), remote: st.remote, status: p.Status}, api.PathHeartbeatStream, "", err)
	}
	return p, api.AppendReply(dst, id, p.Status, "", body)
}
