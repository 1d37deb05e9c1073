package raftstore

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// Store is one node of the lease cluster: a raft member whose FSM is the
// lease model, plus the leader-only lessor that turns heartbeats into
// in-memory renewals and overdue leases into proposals. All methods are
// safe for concurrent use.
type Store struct {
	cfg   Config
	cmds  *Commands
	log   *zap.Logger
	clock Clock

	fsm  *fsm
	raft *raft.Raft
	// logs is the raft log and stable store (logstore.go); lock keeps a
	// second process off the data dir while this one runs.
	logs  *walStore
	lock  *dirLock
	trans raft.Transport
	// net is the TCP transport under trans; Close must release its pooled
	// connections (raft's Shutdown closes only the listener), or the
	// peers' connection handlers would wait on them forever.
	net   *raft.NetworkTransport
	layer *streamLayer
	// raftRef is raft for the transport's dialer, which may run before
	// Open has set s.raft.
	raftRef atomic.Pointer[raft.Raft]
	hclog   hclog.Logger
	// stamp is the Extensions of every entry this node proposes (format.go).
	stamp  []byte
	lessor *lessor
	verify *verifier
	m      *metrics

	// leadMu guards leadReady and leading: whether this node, as leader,
	// has taken office (its own entry committed, leases extended).
	// leadReady is closed when it has, and replaced when it steps down.
	leadMu    sync.Mutex
	leadReady chan struct{}
	leading   bool

	// caughtUp latches once a follower applied up to readyTarget, the
	// commit index it saw at first leader contact (Ready).
	caughtUp    atomic.Bool
	readyTarget atomic.Uint64

	// peers is the leader's view of its peers' reachability (peers.go).
	peers peerWatch

	// proposeGate is held for reading from a proposal's proposable check
	// until raft has taken the entry (and awaiting counts it), and taken
	// for writing by drainProposals: once it has it, every later proposal
	// sees the close or the halt and none is left half way to raft.
	proposeGate sync.RWMutex
	// awaiting counts the proposals raft has taken whose future has not
	// answered yet (drain.go).
	awaiting atomic.Int64
	// haltDone is closed when the raft shutdown that follows a halt
	// (format.go) is over; Close waits for it.
	haltDone chan struct{}

	closing   chan struct{}
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup
}
