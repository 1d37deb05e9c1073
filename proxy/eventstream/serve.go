package eventstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"time"
)

// KeepAlive is how often an idle stream gets a comment line, so proxies
// do not time it out.
const KeepAlive = 15 * time.Second

// ResponseHead is the HTTP response head of a stream written on a
// connection taken over from the server: the body ends when the
// connection closes.
const ResponseHead = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n" +
	"X-Accel-Buffering: no\r\nConnection: close\r\n\r\n"

// ErrClientGone reports a stream whose client closed the connection.
var ErrClientGone = errors.New("eventstream: client closed the stream")

// Write writes ev as one SSE message.
func Write(w io.Writer, ev Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, "id: "+ev.ID+"\nevent: "+string(ev.Kind)+"\ndata: "+string(b)+"\n\n")
	return err
}

// WatchClose returns a channel closed when conn's peer closes it (or it
// fails). It reads conn until then, so the client must not send anything
// the stream needs: a streaming client sends nothing after its request.
// The caller must close conn and wait for the channel before it gives conn
// back (a hijack handler returning): the reader would race its reuse.
func WatchClose(conn net.Conn) <-chan struct{} {
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		var b [512]byte
		for {
			if _, err := conn.Read(b[:]); err != nil {
				return
			}
		}
	}()
	return gone
}

// Serve writes sub to w: the backlog, then live events and keepalives,
// flushing each, until gone is closed (ErrClientGone), a write fails, ctx
// ends or the subscription is dropped (nil: the client reconnects and
// catches up). seen, when set, is told every event before it is written
// (attach ties the leases it names).
func Serve(ctx context.Context, w *bufio.Writer, sub *Subscription, gone <-chan struct{}, keepAlive time.Duration, seen func(Event)) error {
	send := func(ev Event) error {
		if seen != nil {
			seen(ev)
		}
		if err := Write(w, ev); err != nil {
			return err
		}
		return w.Flush()
	}
	for _, ev := range sub.Backlog {
		if err := send(ev); err != nil {
			return err
		}
	}
	t := time.NewTicker(keepAlive)
	defer t.Stop()
	for {
		select {
		case <-gone:
			return ErrClientGone
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-sub.C:
			if !ok {
				return nil
			}
			if err := send(ev); err != nil {
				return err
			}
		case <-t.C:
			if _, err := w.WriteString(": keepalive\n\n"); err != nil {
				return err
			}
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}
