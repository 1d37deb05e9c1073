package api

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The heartbeat stream (DESIGN.md 4.4). A sidecar POSTs to
// PathHeartbeatStream with "Connection: Upgrade" and "Upgrade:
// HeartbeatStreamProtocol"; the member authorizes it exactly as a unary
// heartbeat, answers 101 and from then on the connection carries frames
// both ways until either side closes it:
//
//	frame = length (4 bytes, big endian, of what follows, at most MaxStreamFrame) payload
//	beat  = beat id (8 bytes) | session id length (2 bytes) | session id | HeartbeatRequest JSON
//	reply = beat id (8 bytes) | HTTP status (2 bytes) | leader length (2 bytes) | leader | body
//
// A reply's body is the HeartbeatResponse JSON when the status is 200, else
// the problem JSON the unary route would have answered; leader, when not
// empty, names the leader's HTTP address (a follower relayed the beat). The
// client chooses beat ids (unique among its beats in flight, never 0);
// replies may come in any order. Beat id 0 is the member's last frame: a
// problem saying why it is closing the stream (a malformed frame), sent
// only after every beat read before it has been answered.
//
// The framing is binary around a JSON body because the JSON is the unary
// route's body, decoded by the same code; the binary envelope costs no
// scan to find where a frame ends and carries no header block per beat.
const (
	// HeartbeatStreamProtocol is the Upgrade token of the heartbeat stream.
	HeartbeatStreamProtocol = "fencepost-heartbeat/1"
	// MaxStreamFrame bounds a frame's payload: a heartbeat naming the
	// most leases a session may hold fits with room to spare.
	MaxStreamFrame = 1 << 20
	// StreamFrameHeader is the size of a frame's length prefix.
	StreamFrameHeader = 4
)

// ErrBadFrame is a heartbeat-stream frame that does not parse.
var ErrBadFrame = errors.New("api: malformed heartbeat stream frame")

// Beat is one decoded client frame. SessionID and Body alias the payload.
type Beat struct {
	ID        uint64
	SessionID []byte
	Body      []byte
}

// Reply is one decoded member frame. Leader and Body alias the payload.
type Reply struct {
	ID     uint64
	Status int
	Leader []byte
	Body   []byte
}

// FrameLen reads a frame's length prefix and checks it against
// MaxStreamFrame.
func FrameLen(hdr []byte) (int, error) {
	n := binary.BigEndian.Uint32(hdr)
	if n > MaxStreamFrame {
		return 0, fmt.Errorf("%w: frame of %d bytes exceeds the limit of %d", ErrBadFrame, n, MaxStreamFrame)
	}
	return int(n), nil
}

// AppendBeat appends the whole frame (length prefix included) of a beat.
func AppendBeat(dst []byte, id uint64, sessionID string, body []byte) []byte {
	n := 8 + 2 + len(sessionID) + len(body)
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	dst = binary.BigEndian.AppendUint64(dst, id)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(sessionID)))
	dst = append(dst, sessionID...)
	return append(dst, body...)
}

// ParseBeat decodes a beat payload (the frame without its length prefix).
func ParseBeat(p []byte) (Beat, error) {
	if len(p) < 10 {
		return Beat{}, fmt.Errorf("%w: beat of %d bytes is shorter than its 10-byte header", ErrBadFrame, len(p))
	}
	b := Beat{ID: binary.BigEndian.Uint64(p)}
	if b.ID == 0 {
		return Beat{}, fmt.Errorf("%w: beat id 0 is reserved", ErrBadFrame)
	}
	sl := int(binary.BigEndian.Uint16(p[8:]))
	if 10+sl > len(p) {
		return Beat{}, fmt.Errorf("%w: session id of %d bytes overruns the %d-byte beat", ErrBadFrame, sl, len(p))
	}
	b.SessionID, b.Body = p[10:10+sl], p[10+sl:]
	return b, nil
}

// AppendReply appends the whole frame (length prefix included) of a reply.
func AppendReply(dst []byte, id uint64, status int, leader string, body []byte) []byte {
	n := 8 + 2 + 2 + len(leader) + len(body)
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	dst = binary.BigEndian.AppendUint64(dst, id)
	dst = binary.BigEndian.AppendUint16(dst, uint16(status))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(leader)))
	dst = append(dst, leader...)
	return append(dst, body...)
}

// ParseReply decodes a reply payload (the frame without its length prefix).
func ParseReply(p []byte) (Reply, error) {
	if len(p) < 12 {
		return Reply{}, fmt.Errorf("%w: reply of %d bytes is shorter than its 12-byte header", ErrBadFrame, len(p))
	}
	r := Reply{ID: binary.BigEndian.Uint64(p), Status: int(binary.BigEndian.Uint16(p[8:]))}
	ll := int(binary.BigEndian.Uint16(p[10:]))
	if 12+ll > len(p) {
		return Reply{}, fmt.Errorf("%w: leader of %d bytes overruns the %d-byte reply", ErrBadFrame, ll, len(p))
	}
	r.Leader, r.Body = p[12:12+ll], p[12+ll:]
	return r, nil
}
