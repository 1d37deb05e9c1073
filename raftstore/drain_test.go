package raftstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// entryGated is a test-only entry type whose apply waits for a gate, so a
// test can hold the FSM while committed entries queue up behind it.
const entryGated entryType = 0x3e

// TestCloseAnswersEveryCommittedProposal: entries committed but still
// queued for the FSM when Close runs are answered, not dropped. Without
// drainProposals, hashicorp/raft's shutdown drops the queued batches and
// their proposers wait forever (the CI hang of the leader-kill test).
func TestCloseAnswersEveryCommittedProposal(t *testing.T) {
	gate := make(chan struct{})
	entryHandlers[entryGated] = func(f *fsm, index uint64, _ []byte) (any, error) {
		<-gate
		return nil, nil
	}
	t.Cleanup(func() { delete(entryHandlers, entryGated) })

	c := newTestCluster(t, 1)
	s := c.waitForLeader()
	const queued = 20
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	propose := func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.applyEntry(context.Background(), entryGated, struct{}{})
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}()
	}
	// One entry holds the FSM; each of the others is committed on its
	// own, so each is its own batch in raft's queue to the FSM.
	for range queued + 1 {
		before := s.raft.CommitIndex()
		propose()
		waitFor(t, waitTimeout, "the entry to commit", func() bool { return s.raft.CommitIndex() > before })
	}

	t.Logf("%s queued", time.Now().Format("05.000"))
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		c.stop(c.index(s))
	}()
	<-s.closing
	// Let the FSM go once raft is shutting down, or once it is plain
	// that Close waits for the queued entries first.
	deadline := time.Now().Add(time.Second)
	for s.raft.State() != raft.Shutdown && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("%s gate opened, state %v", time.Now().Format("05.000"), s.raft.State())
	close(gate)

	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%d of %d committed proposals were never answered after Close", queued+1-len(errs), queued+1)
	}
	t.Logf("%s answered", time.Now().Format("05.000"))
	<-closed
	t.Logf("%s closed", time.Now().Format("05.000"))
	for _, err := range errs {
		require.NoError(t, err, "a committed entry is answered with its result")
	}
}
