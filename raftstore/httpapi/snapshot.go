package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/raftstore"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
)

// backupStore is the part of a Store that takes backups; the real
// *raftstore.Store has it, a test double may not (then the route is 501).
type backupStore interface {
	Backup(ctx context.Context) (*raftstore.Backup, error)
}

// snapshot serves GET /v1/snapshot (PermBackup: operators only): a backup
// streamed from the leader. It is not forwarded (a follower would have to
// hold or relay the whole state): a follower answers 503 with the leader's
// address in HeaderLeader, and 'fencepost ctl snapshot save' asks there.
// The body ends with a checksum trailer; a stream cut short fails it.
func (s *Server) snapshot(rc *fasthttp.RequestCtx) {
	bs, ok := s.store.(backupStore)
	if !ok {
		writeProblem(rc, problemFor(fmt.Errorf("%w: this store takes no backups", ErrNoRoute), api.PathSnapshot))
		return
	}
	ctx, cancel := context.WithTimeout(s.readCtx, s.cfg.RequestTimeout)
	defer cancel()
	b, err := bs.Backup(ctx)
	if err != nil {
		if isNotLeader(err) {
			if l := s.store.LeaderHTTP(); l != "" {
				rc.Response.Header.Set(HeaderLeader, l)
			}
		}
		writeProblem(rc, problemFor(err, api.PathSnapshot))
		return
	}
	rc.SetContentType(raftstore.BackupContentType)
	rc.SetStatusCode(http.StatusOK)
	if rc.IsHead() {
		b.Release()
		return
	}
	s.log.Info("streaming a backup", zap.Uint64("index", b.Header.Index), zap.Int("tasks", b.Header.Tasks))
	// fasthttp sets one write deadline for the whole response; a large
	// state on a slow link would overrun it, so each chunk that goes out
	// moves the deadline on: WriteTimeout bounds a stalled stream, not a
	// long one.
	pw := &progressWriter{conn: rc.Conn(), timeout: s.cfg.WriteTimeout}
	rc.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer b.Release()
		pw.w = w
		n, err := b.WriteTo(pw)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			s.log.Warn("backup stream ended early; the client's file fails its checksum", zap.Int64("bytes", n), zap.Error(err))
		}
	})
}

// progressWriter extends conn's write deadline as bytes go out, at most
// once a second.
type progressWriter struct {
	w       io.Writer
	conn    net.Conn
	timeout time.Duration
	last    time.Time
}

func (p *progressWriter) Write(b []byte) (int, error) {
	if now := time.Now(); p.timeout > 0 && now.Sub(p.last) > time.Second {
		p.last = now
		_ = p.conn.SetWriteDeadline(now.Add(p.timeout))
	}
	return p.w.Write(b)
}
