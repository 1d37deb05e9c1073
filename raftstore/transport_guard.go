package raftstore

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// errRefused ends a raft connection whose RPC was refused; raft logs it
// and drops the connection, having read nothing of the RPC.
var errRefused = errors.New("raftstore: raft RPC refused")

// The RPC type bytes of hashicorp/raft's network transport (its wire
// format; the constants are unexported there).
const (
	rpcAppendEntries   = 0
	rpcRequestVote     = 1
	rpcInstallSnapshot = 2
	rpcTimeoutNow      = 3
	rpcRequestPreVote  = 4
)

// guard sits between a member's TLS connection and raft's decoder. Before
// raft reads an RPC, guard reads it whole (type byte and msgpack body),
// decodes its header and checks that the sender id it claims is the
// member named by the connection's certificate, and that this member is
// one the cluster accepts now (allow: in the configuration, not removed;
// asked per RPC, so a member removed while its connection stays open is
// refused from its next RPC on). Only then are the very
// bytes it read handed to raft; a snapshot's data that follows an
// InstallSnapshot request passes through unread. So a member cannot speak
// for another, and raft never sees an RPC that failed the check.
//
// The check costs one extra parse of each RPC's framing (entries' data are
// skipped, not copied).
type guard struct {
	net.Conn
	peer    string
	in      *bufio.Reader
	rec     recorder
	dec     *codec.Decoder
	pending []byte
	raw     int64
	allow   allowFunc
	refuse  func(from net.Addr, reason string, err error)
}

func newGuard(c net.Conn, peer string, allow allowFunc, refuse func(net.Addr, string, error)) *guard {
	g := &guard{Conn: c, peer: peer, in: bufio.NewReaderSize(c, 64<<10), allow: allow, refuse: refuse}
	g.rec.r = g.in
	g.dec = codec.NewDecoder(&g.rec, &codec.MsgpackHandle{})
	return g
}

// Read implements net.Conn for raft's decoder.
func (g *guard) Read(p []byte) (int, error) {
	if len(g.pending) == 0 {
		if g.raw > 0 {
			if int64(len(p)) > g.raw {
				p = p[:g.raw]
			}
			n, err := g.in.Read(p)
			g.raw -= int64(n)
			return n, err
		}
		if err := g.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, g.pending)
	g.pending = g.pending[n:]
	return n, nil
}

// rpcHeaderOnly decodes just the header of any request; msgpack skips the
// other fields. Embedded, as in raft's requests, so its fields are read
// from the top level of the message.
type rpcHeaderOnly struct {
	raft.RPCHeader
}

// next reads and checks one RPC into pending.
func (g *guard) next() error {
	g.rec.buf = g.rec.buf[:0]
	t, err := g.rec.ReadByte()
	if err != nil {
		return err
	}
	var hdr raft.RPCHeader
	switch t {
	case rpcAppendEntries, rpcRequestVote, rpcTimeoutNow, rpcRequestPreVote:
		var m rpcHeaderOnly
		err = g.dec.Decode(&m)
		hdr = m.RPCHeader
	case rpcInstallSnapshot:
		var m raft.InstallSnapshotRequest
		err = g.dec.Decode(&m)
		hdr, g.raw = m.RPCHeader, m.Size
		if err == nil && m.Size < 0 {
			err = fmt.Errorf("negative snapshot size %d", m.Size)
		}
	default:
		err = fmt.Errorf("%w: unknown RPC type %d from %s", errRefused, t, g.peer)
		g.refuse(g.RemoteAddr(), refusedUnknown, err)
		return err
	}
	if err != nil {
		err = fmt.Errorf("%w: undecodable RPC from %s: %v", errRefused, g.peer, err)
		g.refuse(g.RemoteAddr(), refusedMalformed, err)
		return err
	}
	if string(hdr.ID) != g.peer {
		err = fmt.Errorf("%w: member %q sent an RPC claiming to be %q", errRefused, g.peer, hdr.ID)
		g.refuse(g.RemoteAddr(), refusedClaim, err)
		return err
	}
	if reason, err := g.allow(g.peer); err != nil {
		err = fmt.Errorf("%w: member certificate %q: %v", errRefused, g.peer, err)
		g.refuse(g.RemoteAddr(), reason, err)
		return err
	}
	g.pending = g.rec.buf
	return nil
}

// recorder is the io.ByteScanner the decoder reads through (so it reads
// exactly one message, no further), keeping every byte it consumed.
type recorder struct {
	r   *bufio.Reader
	buf []byte
}

func (r *recorder) ReadByte() (byte, error) {
	b, err := r.r.ReadByte()
	if err == nil {
		r.buf = append(r.buf, b)
	}
	return b, err
}

func (r *recorder) UnreadByte() error {
	if err := r.r.UnreadByte(); err != nil {
		return err
	}
	r.buf = r.buf[:len(r.buf)-1]
	return nil
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.buf = append(r.buf, p[:n]...)
	return n, err
}

// tlsRecordHandshake is the first byte of every TLS connection (a
// handshake record); no raft RPC type has this value.
const tlsRecordHandshake = 0x16

// plainGuard refuses a TLS client on a plaintext raft port with a clear
// log line, instead of raft's "unknown rpc type 22".
type plainGuard struct {
	net.Conn
	refuse  func(net.Addr, string, error)
	checked bool
}

func (p *plainGuard) Read(b []byte) (int, error) {
	n, err := p.Conn.Read(b)
	if !p.checked && n > 0 {
		p.checked = true
		if b[0] == tlsRecordHandshake {
			err := fmt.Errorf("%w: a TLS client on the plaintext raft port (set tls on every member, or on none)", errRefused)
			p.refuse(p.RemoteAddr(), refusedTLSClient, err)
			return 0, err
		}
	}
	return n, err
}

var _ io.ByteScanner = (*recorder)(nil)
