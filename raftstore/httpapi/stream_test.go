package httpapi_test

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencepost/fencepost/fence/api"
	"github.com/fencepost/fencepost/fence/lease"
	"github.com/fencepost/fencepost/raftstore/httpapi"
	"github.com/fencepost/fencepost/raftstore/httpapi/httpapitest"
	"github.com/stretchr/testify/require"
)

// rawStream is a heartbeat stream driven frame by frame.
type rawStream struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

// upgrade sends the upgrade request (extra headers as name/value pairs)
// and returns the response; with 101 the stream is ready for frames.
func upgrade(t *testing.T, addr string, tc *tls.Config, headers ...string) (*rawStream, *http.Response) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	if tc != nil {
		conn = tls.Client(conn, tc)
	}
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	hdr := "Connection: Upgrade\r\nUpgrade: " + api.HeartbeatStreamProtocol + "\r\n"
	if len(headers) > 0 {
		hdr = ""
		for i := 0; i+1 < len(headers); i += 2 {
			hdr += headers[i] + ": " + headers[i+1] + "\r\n"
		}
	}
	_, err = io.WriteString(conn, "POST "+api.PathHeartbeatStream+" HTTP/1.1\r\nHost: x\r\n"+hdr+"Content-Length: 0\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	return &rawStream{t: t, conn: conn, br: br}, resp
}

func (s *rawStream) write(frames ...[]byte) {
	s.t.Helper()
	var all []byte
	for _, f := range frames {
		all = append(all, f...)
	}
	_, err := s.conn.Write(all)
	require.NoError(s.t, err)
}

// read returns the next reply, or an error (io.EOF once the member closed).
func (s *rawStream) read() (api.Reply, error) {
	var hdr [api.StreamFrameHeader]byte
	if _, err := io.ReadFull(s.br, hdr[:]); err != nil {
		return api.Reply{}, err
	}
	n, err := api.FrameLen(hdr[:])
	if err != nil {
		return api.Reply{}, err
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(s.br, p); err != nil {
		return api.Reply{}, err
	}
	return api.ParseReply(p)
}

func (s *rawStream) mustRead() api.Reply {
	s.t.Helper()
	r, err := s.read()
	require.NoError(s.t, err)
	return r
}

func replyProblem(t *testing.T, r api.Reply) api.Problem {
	t.Helper()
	var p api.Problem
	require.NoError(t, json.Unmarshal(r.Body, &p), "body: %s", r.Body)
	require.Equal(t, r.Status, p.Status)
	return p
}

func beatFrame(t *testing.T, id uint64, sid string, req api.HeartbeatRequest) []byte {
	return api.AppendBeat(nil, id, sid, mustJSON(t, req))
}

// streamSession serves a double store and opens one session with a lease.
func streamSession(t *testing.T) (addr, sid string) {
	t.Helper()
	st := httpapitest.New()
	srv := startServer(t, st)
	sess, err := st.OpenSession(t.Context(), "r1", api.OpenSessionRequest{WorkerID: "w"})
	require.NoError(t, err)
	return srv.Addr(), sess.SessionID
}

func TestStreamPipelinedBeatsEachAnswered(t *testing.T) {
	addr, sid := streamSession(t)
	s, resp := upgrade(t, addr, nil)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	require.Equal(t, api.HeartbeatStreamProtocol, resp.Header.Get("Upgrade"))
	ids := []uint64{7, 8, 9, 10}
	var frames [][]byte
	for _, id := range ids {
		frames = append(frames, beatFrame(t, id, sid, api.HeartbeatRequest{}))
	}
	s.write(frames...) // all in one write: pipelined
	got := map[uint64]bool{}
	for range ids {
		r := s.mustRead()
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		var hb api.HeartbeatResponse
		require.NoError(t, json.Unmarshal(r.Body, &hb))
		got[r.ID] = true
	}
	require.Len(t, got, len(ids))

	// A beat the store refuses is answered with its problem, and the
	// stream goes on.
	s.write(beatFrame(t, 11, "no-such-session", api.HeartbeatRequest{}), api.AppendBeat(nil, 12, sid, []byte(`{"leases":`)))
	for range 2 {
		r := s.mustRead()
		switch r.ID {
		case 11:
			require.Equal(t, lease.ErrorCode(lease.ErrSessionNotFound), replyProblem(t, r).Code)
		case 12:
			require.Equal(t, api.CodeBadRequest, replyProblem(t, r).Code)
		default:
			t.Fatalf("reply to unknown beat %d", r.ID)
		}
	}
	s.write(beatFrame(t, 13, sid, api.HeartbeatRequest{}))
	require.Equal(t, http.StatusOK, s.mustRead().Status)
}

func TestStreamBadFrameAnswersWhatCameBeforeAndCloses(t *testing.T) {
	huge := binary.BigEndian.AppendUint32(nil, api.MaxStreamFrame+1)
	short := []byte{0, 0, 0, 3, 1, 2, 3}
	overrun := append(binary.BigEndian.AppendUint32(nil, 12), 0, 0, 0, 0, 0, 0, 0, 5, 0, 200, 'a', 'b')
	zero := api.AppendBeat(nil, 0, "s", []byte(`{}`))
	for name, bad := range map[string][]byte{"oversized": huge, "short": short, "overrun": overrun, "id zero": zero} {
		t.Run(name, func(t *testing.T) {
			addr, sid := streamSession(t)
			s, resp := upgrade(t, addr, nil)
			require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
			s.write(beatFrame(t, 1, sid, api.HeartbeatRequest{}), bad)
			r := s.mustRead()
			require.Equal(t, uint64(1), r.ID, "the beat before the bad frame is answered first")
			require.Equal(t, http.StatusOK, r.Status)
			last := s.mustRead()
			require.Equal(t, uint64(0), last.ID)
			p := replyProblem(t, last)
			require.Equal(t, api.CodeBadRequest, p.Code)
			require.Contains(t, p.Detail, "malformed heartbeat stream frame")
			_, err := s.read()
			require.ErrorIs(t, err, io.EOF, "the member closed the stream")
		})
	}
}

func TestStreamUpgradeNeedsItsHeaders(t *testing.T) {
	addr, _ := streamSession(t)
	for _, h := range [][]string{
		{"Connection", "keep-alive"},
		{"Connection", "Upgrade", "Upgrade", "websocket"},
	} {
		_, resp := upgrade(t, addr, nil, h...)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%v", h)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Contains(t, string(body), api.HeartbeatStreamProtocol)
	}
}

func TestStreamEndsWithTheServer(t *testing.T) {
	st := httpapitest.New()
	srv := startServer(t, st)
	sess, err := st.OpenSession(t.Context(), "r1", api.OpenSessionRequest{WorkerID: "w"})
	require.NoError(t, err)
	s, resp := upgrade(t, srv.Addr(), nil)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	s.write(beatFrame(t, 1, sess.SessionID, api.HeartbeatRequest{}))
	require.Equal(t, http.StatusOK, s.mustRead().Status)
	require.NoError(t, srv.Close())
	_, err = s.read()
	require.Error(t, err, "Close ends open streams (goleak checks their goroutines)")
	require.False(t, strings.Contains(err.Error(), "timeout"), "closed, not left hanging: %v", err)
}

// TestStreamInflightLimit: a stream has at most 256 beats being served at
// once; the member reads the 257th only after one of them was answered.
func TestStreamInflightLimit(t *testing.T) {
	const limit = 256
	st := httpapitest.New()
	srv := startServer(t, st, func(c *httpapi.Config) { c.RequestTimeout = time.Minute })
	sess, err := st.OpenSession(t.Context(), "r1", api.OpenSessionRequest{WorkerID: "w"})
	require.NoError(t, err)
	const hold = 3 * time.Second
	for range limit + 1 {
		st.Inject("Heartbeat", httpapitest.Fault{Delay: hold})
	}
	s, resp := upgrade(t, srv.Addr(), nil)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	var frames [][]byte
	for id := range uint64(limit + 1) {
		frames = append(frames, beatFrame(t, id+1, sess.SessionID, api.HeartbeatRequest{}))
	}
	s.write(frames...)
	beats := func() int { return len(st.CallsOf("Heartbeat")) }
	httpapitest.WaitFor(t, "256 beats in service", func() bool { return beats() >= limit })
	// Every beat in service sleeps for hold: until the first wakes, the
	// 257th must stay unread.
	require.Never(t, func() bool { return beats() > limit }, hold/2, 10*time.Millisecond)
	got := map[uint64]bool{}
	for range limit + 1 {
		r := s.mustRead()
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		got[r.ID] = true
	}
	require.Len(t, got, limit+1)
	require.Equal(t, limit+1, beats())
}
