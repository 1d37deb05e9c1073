package eventstream

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func held(ls ...Event) func() []Event { return func() []Event { return ls } }

func TestFirstEventsAreTheState(t *testing.T) {
	h := NewHub()
	s := h.Subscribe("", "", held(Event{TaskID: "a", Epoch: 3}, Event{TaskID: "b", Epoch: 4}))
	require.Len(t, s.Backlog, 2)
	for _, ev := range s.Backlog {
		require.Equal(t, KindState, ev.Kind)
		require.False(t, ev.Stop)
		require.Equal(t, h.Boot()+"-0", ev.ID)
	}
	// Scoped to one task; none held in scope: one empty state.
	s = h.Subscribe("", "zzz", held(Event{TaskID: "a", Epoch: 3}))
	require.Equal(t, []Kind{KindState}, kinds(s.Backlog))
	require.Empty(t, s.Backlog[0].TaskID)
}

func TestIDsAndStopRule(t *testing.T) {
	h := NewHub()
	s := h.Subscribe("", "", nil)
	for _, ev := range []Event{
		{Kind: KindAcquired, TaskID: "a", Epoch: 1},
		{Kind: KindLost, TaskID: "a", Epoch: 1},
		{Kind: KindRevived, TaskID: "a", Epoch: 1},
		{Kind: KindReleased, TaskID: "a", Epoch: 1, Reason: "completed"},
		{Kind: KindAcquired, TaskID: "a", Epoch: 9},
		{Kind: KindRevoked, TaskID: "a", Epoch: 9},
	} {
		_, ok := h.Publish(ev)
		require.True(t, ok)
	}
	got := drain(s, 6)
	for i, ev := range got {
		require.Equal(t, uint64(i+1), ev.Seq)
		require.Equal(t, h.Boot()+"-"+itoa(i+1), ev.ID)
	}
	require.Equal(t, []bool{false, true, false, false, false, true}, stops(got), "lost and revoked stop; a release the worker asked for does not")
	ev, _ := h.Publish(Event{Kind: KindReleased, TaskID: "b", Epoch: 2, Reason: "worker_exited", Stop: true})
	require.True(t, ev.Stop, "a release the worker did not ask for stops")
}

func TestOneEventPerTransition(t *testing.T) {
	h := NewHub()
	pub := func(k Kind, epoch uint64) bool {
		_, ok := h.Publish(Event{Kind: k, TaskID: "a", Epoch: epoch})
		return ok
	}
	require.True(t, pub(KindAcquired, 1))
	require.True(t, pub(KindLost, 1))
	require.False(t, pub(KindLost, 1), "no second lost for one epoch")
	require.True(t, pub(KindRevived, 1))
	require.True(t, pub(KindLost, 1), "lost again after a revive is a new transition")
	require.True(t, pub(KindRevoked, 1))
	require.False(t, pub(KindLost, 1), "nothing after a final event")
	require.False(t, pub(KindReleased, 1))
	require.True(t, pub(KindAcquired, 2), "a new epoch is a new lease")
}

func TestReconnectReplaysFromTheRing(t *testing.T) {
	h := NewHub()
	for i := 1; i <= 5; i++ {
		h.Publish(Event{Kind: KindAcquired, TaskID: "t" + itoa(i), Epoch: 1})
	}
	s := h.Subscribe(h.Boot()+"-3", "", held(Event{TaskID: "x", Epoch: 1}))
	require.Equal(t, []uint64{4, 5}, seqs(s.Backlog), "missed events, no state")
	s = h.Subscribe(h.Boot()+"-3", "t5", nil)
	require.Equal(t, []uint64{5}, seqs(s.Backlog), "scoped replay")
	s = h.Subscribe(h.Boot()+"-5", "", nil)
	require.Empty(t, s.Backlog, "nothing missed")

	// Another boot, garbage, a future seq, or too old: state again.
	for _, id := range []string{"other-3", "garbage", h.Boot() + "-99", h.Boot() + "-x"} {
		s = h.Subscribe(id, "", held(Event{TaskID: "x", Epoch: 1}))
		require.Equal(t, []Kind{KindState}, kinds(s.Backlog), id)
	}
	for i := 0; i < RingSize+10; i++ {
		h.Publish(Event{Kind: KindAcquired, TaskID: "n" + itoa(i), Epoch: 1})
	}
	s = h.Subscribe(h.Boot()+"-3", "", nil)
	require.Equal(t, []Kind{KindState}, kinds(s.Backlog), "fell out of the ring")
	s = h.Subscribe(h.Boot()+"-"+itoa(int(h.seq)-RingSize), "", nil)
	require.Len(t, s.Backlog, RingSize, "exactly the ring")
}

func TestSlowSubscriberIsDroppedNotWaitedFor(t *testing.T) {
	h := NewHub()
	s := h.Subscribe("", "", nil)
	for i := 0; i < subBuffer+5; i++ {
		h.Publish(Event{Kind: KindAcquired, TaskID: "t" + itoa(i), Epoch: 1})
	}
	n := 0
	for range s.C {
		n++
	}
	require.Equal(t, subBuffer, n, "the channel closes once it overflows")
}

// Over a real TCP connection: the head, state first, ids, keepalive, and
// the client's close noticed at once.
func TestServeOverTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	h := NewHub()
	done := make(chan error, 1)
	var seen []Event
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		w := bufio.NewWriter(c)
		_, _ = w.WriteString(ResponseHead)
		sub := h.Subscribe("", "", held(Event{TaskID: "a", Epoch: 7}))
		defer sub.Close()
		done <- Serve(context.Background(), w, sub, WatchClose(c), 50*time.Millisecond, func(ev Event) { seen = append(seen, ev) })
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "HTTP/1.1 200 OK\r\n", line)
	for line != "\r\n" {
		line, err = r.ReadString('\n')
		require.NoError(t, err)
	}
	msg := readMessage(t, r)
	require.Equal(t, "id: "+h.Boot()+"-0\nevent: state\n", msg[:strings.Index(msg, "data: ")])
	var ev Event
	require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(msg[strings.Index(msg, "data: "):], "data: ")), &ev))
	require.Equal(t, Event{Kind: KindState, TaskID: "a", Epoch: 7}, Event{Kind: ev.Kind, TaskID: ev.TaskID, Epoch: ev.Epoch})

	h.Publish(Event{Kind: KindLost, TaskID: "a", Epoch: 7, Reason: "expired"})
	msg = readMessage(t, r)
	require.Contains(t, msg, "id: "+h.Boot()+"-1\nevent: lost\n")
	require.Contains(t, msg, `"stop":true`)
	require.Contains(t, readMessage(t, r), ": keepalive")

	require.NoError(t, c.Close())
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrClientGone)
	case <-time.After(5 * time.Second):
		t.Fatal("the client's close was not noticed")
	}
	require.Equal(t, []Kind{KindState, KindLost}, kinds(seen))
}

func readMessage(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	var b strings.Builder
	for {
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		if line == "\n" {
			return b.String()
		}
		b.WriteString(line)
	}
}

func drain(s *Subscription, n int) []Event {
	var out []Event
	for len(out) < n {
		out = append(out, <-s.C)
	}
	return out
}

func kinds(evs []Event) []Kind {
	var out []Kind
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

func stops(evs []Event) []bool {
	var out []bool
	for _, e := range evs {
		out = append(out, e.Stop)
	}
	return out
}

func seqs(evs []Event) []uint64 {
	var out []uint64
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }
