package raftstore

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// entryType is the first byte of every raft log entry this store writes;
// the rest is the JSON body of that type (Consul's layout). Values are
// written to disk: append only, never renumber.
type entryType uint8

const (
	// entryCommand carries a lease.Command for the model.
	entryCommand entryType = 1
	// entryNode records (or, with Remove, forgets) a member's HTTP address.
	entryNode entryType = 2
	// entryKey adds a token signing key and makes it the current one.
	entryKey entryType = 3

	// ignorableFlag marks an entry type that nodes which do not know it may
	// skip. New optional entry types set it, so a rolling upgrade does not
	// stop old replicas; unknown types without it stop the node instead of
	// letting replicas diverge.
	ignorableFlag entryType = 0x80
)

// nodeMeta is cluster metadata kept beside the model: how to reach a
// member's HTTP API, so a follower can name the leader's address.
type nodeMeta struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr,omitempty"`
	HTTPAddr string `json:"httpAddr,omitempty"`
	Remove   bool   `json:"remove,omitempty"`
}

// signingKey is a replicated token signing key: its id and public half
// only. Priv is read only to drop it: versions before TLS generated a key
// and replicated it whole; such an entry still decodes, and its private
// half is discarded on apply (and so never reaches memory or a snapshot).
type signingKey struct {
	ID   string             `json:"id"`
	Pub  ed25519.PublicKey  `json:"pub"`
	Priv ed25519.PrivateKey `json:"priv,omitempty"`
}

// entryHandler applies one decoded entry body at a raft index and returns
// the apply response. A body that does not decode is an error: every
// replica would fail the same way, so the member halts (format.go) rather
// than diverge or crash.
type entryHandler func(f *fsm, index uint64, body []byte) (any, error)

// entryHandlers is the registration table of known entry types.
var entryHandlers = map[entryType]entryHandler{
	entryCommand: applyCommand,
	entryNode:    applyNode,
	entryKey:     applyKey,
	entryRemoved: applyRemoved,
	entryBatch:   applyBatch,
	entryBlocked: applyBlocked,
}

// encodeEntry builds a log entry: the type byte followed by JSON.
func encodeEntry(t entryType, body any) ([]byte, error) {
	if c, ok := body.(*lease.Command); ok {
		// The same bytes as json.Marshal, without its reflection: one
		// command is encoded per proposal (lease.AppendCommand).
		out := make([]byte, 1, 256+(len(c.Payload)+len(c.Data)+len(c.Result))*4/3)
		out[0] = byte(t)
		out, err := lease.AppendCommand(out, c)
		if err != nil {
			return nil, fmt.Errorf("raftstore: encode entry %d: %w", t, err)
		}
		return out, nil
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("raftstore: encode entry %d: %w", t, err)
	}
	out := make([]byte, 0, len(b)+1)
	out = append(out, byte(t))
	return append(out, b...), nil
}

// fsm is raft's state machine: a thin shell over lease.Model plus the
// cluster metadata. Apply holds the write lock; reads take the read lock.
type fsm struct {
	mu    sync.RWMutex
	model *lease.Model
	nodes map[string]nodeMeta
	keys  []signingKey // in the order added; the last is current
	// removed is the deny list of removed members' names (peerset.go).
	removed map[string]bool

	applied indexWaiter
	log     *zap.Logger
	// halt stops applying at an entry this build cannot read (format.go);
	// version is this build's, for its error.
	halt    halter
	version string
	// watch wakes long-polling sidecars when their leases change.
	watch *sessionWatch
	// history keeps recent events per task for the console (history.go).
	history *history
}

func newFSM(log *zap.Logger) *fsm {
	return &fsm{model: lease.New(), nodes: map[string]nodeMeta{}, log: log, applied: newIndexWaiter(), watch: newSessionWatch(),
		history: newHistory(defaultHistoryLimits)}
}

// Apply implements raft.FSM. An entry it cannot read halts the member
// (format.go): a panic here, as before, crash-looped the member on every
// restart of its data dir. Once halted, nothing more is applied or counted
// as applied.
func (f *fsm) Apply(l *raft.Log) any {
	if e := f.halt.halted(); e != nil {
		return e
	}
	if len(l.Data) == 0 {
		return f.stop(l, "empty entry")
	}
	t := entryType(l.Data[0])
	h, ok := entryHandlers[t]
	if !ok {
		if t&ignorableFlag != 0 {
			f.log.Warn("skipping unknown ignorable log entry", zap.Uint8("type", uint8(t)), zap.Uint64("index", l.Index),
				zap.String("writer", writerOf(l.Extensions)))
			f.applied.advance(l.Index)
			return nil
		}
		return f.stop(l, "unknown entry type")
	}
	res, err := h(f, l.Index, l.Data[1:])
	if err != nil {
		return f.stop(l, err.Error())
	}
	f.applied.advance(l.Index)
	return res
}

func decodeBody(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("undecodable body: %v", err)
	}
	return nil
}

// applyCommand returns the lease.Result itself as the apply response, so
// the proposer gets the model's answer (Consul returns the FSM's error the
// same way).
func applyCommand(f *fsm, index uint64, body []byte) (any, error) {
	var c lease.Command
	if err := lease.DecodeCommand(body, &c); err != nil {
		return nil, fmt.Errorf("undecodable body: %v", err)
	}
	f.mu.Lock()
	res := f.model.Apply(index, &c)
	f.mu.Unlock()
	f.watch.observe(&c, res)
	f.history.observe(index, &c, res)
	return res, nil
}

func applyNode(f *fsm, _ uint64, body []byte) (any, error) {
	var n nodeMeta
	if err := decodeBody(body, &n); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if n.Remove {
		delete(f.nodes, n.ID)
	} else {
		f.nodes[n.ID] = n
	}
	return nil, nil
}

func applyKey(f *fsm, _ uint64, body []byte) (any, error) {
	var k signingKey
	if err := decodeBody(body, &k); err != nil {
		return nil, err
	}
	k.Priv = nil
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, have := range f.keys {
		if have.ID == k.ID {
			// Re-adding a known key makes it current again.
			f.keys = append(append(f.keys[:i:i], f.keys[i+1:]...), k)
			return nil, nil
		}
	}
	f.keys = append(f.keys, k)
	return nil, nil
}

// StoreConfiguration implements raft.ConfigurationStore. The FSM keeps no
// configuration, but it counts the index as applied: linearizable reads
// wait for the FSM to reach the commit index, and configuration entries
// would otherwise leave it one short forever.
func (f *fsm) StoreConfiguration(index uint64, _ raft.Configuration) {
	if f.halt.halted() != nil {
		return
	}
	f.applied.advance(index)
}

// read runs fn with the model under the read lock.
func (f *fsm) read(fn func(m *lease.Model)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.model)
}

func (f *fsm) node(id string) (nodeMeta, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n, ok := f.nodes[id]
	return n, ok
}

func (f *fsm) currentKey() (signingKey, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if len(f.keys) == 0 {
		return signingKey{}, false
	}
	return f.keys[len(f.keys)-1], true
}

func (f *fsm) allKeys() []signingKey {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return append([]signingKey(nil), f.keys...)
}

// indexWaiter lets readers wait until the FSM has applied an index.
type indexWaiter struct {
	mu      sync.Mutex
	index   uint64
	waiters map[chan struct{}]uint64
}

func newIndexWaiter() indexWaiter {
	return indexWaiter{waiters: map[chan struct{}]uint64{}}
}

func (w *indexWaiter) advance(index uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if index <= w.index {
		return
	}
	w.index = index
	for ch, want := range w.waiters {
		if want <= index {
			close(ch)
			delete(w.waiters, ch)
		}
	}
}

func (w *indexWaiter) get() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.index
}

// set replaces the index (after a snapshot restore, which may move it).
func (w *indexWaiter) set(index uint64) {
	w.mu.Lock()
	w.index = 0
	w.mu.Unlock()
	w.advance(index)
}

// wait blocks until index is applied or ctx ends.
func (w *indexWaiter) wait(ctx context.Context, index uint64) error {
	w.mu.Lock()
	if w.index >= index {
		w.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	w.waiters[ch] = index
	w.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		w.mu.Lock()
		delete(w.waiters, ch)
		w.mu.Unlock()
		return ctx.Err()
	}
}
