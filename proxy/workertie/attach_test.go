package workertie

import (
	"context"
	"sync"
	"testing"

	"github.com/fencepost/fencepost/fence/lease"
	"github.com/stretchr/testify/require"
)

// fakeLeases is a sidecar holding several leases.
type fakeLeases struct {
	mu    sync.Mutex
	held  map[Lease]bool
	given map[Lease]string
}

func newFakeLeases(ls ...Lease) *fakeLeases {
	f := &fakeLeases{held: map[Lease]bool{}, given: map[Lease]string{}}
	for _, l := range ls {
		f.held[l] = true
	}
	return f
}

func (f *fakeLeases) Held() []Lease {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Lease
	for l := range f.held {
		out = append(out, l)
	}
	return out
}

func (f *fakeLeases) GiveBack(_ context.Context, l Lease, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held[l] {
		delete(f.held, l)
		f.given[l] = reason
	}
	return nil
}

func (f *fakeLeases) release(l Lease) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.held, l)
}

func TestAttachCloseGivesBackWhatItTied(t *testing.T) {
	a1, b1 := Lease{"a", 1}, Lease{"b", 2}
	f := newFakeLeases(a1, b1)
	as := NewAttachments(f)
	x := as.Open("a")
	x.Saw(a1)
	x.Saw(b1) // outside its scope
	got, err := x.Close(t.Context())
	require.NoError(t, err)
	require.Equal(t, []Lease{a1}, got)
	require.Equal(t, map[Lease]string{a1: lease.ReasonWorkerExited}, f.given)
	again, _ := x.Close(t.Context())
	require.Empty(t, again, "a second close does nothing")
	require.Zero(t, as.Count())
}

func TestAttachCloseAfterReleaseChangesNothing(t *testing.T) {
	a1 := Lease{"a", 1}
	f := newFakeLeases(a1)
	x := NewAttachments(f).Open("")
	x.Saw(a1)
	f.release(a1) // the worker completed
	got, _ := x.Close(t.Context())
	require.Empty(t, got)
	require.Empty(t, f.given)
}

// A newer grant of the same task, which the closing stream never saw, is
// not touched; a lease another open stream saw stays until that one closes.
func TestAttachCloseSparesNewerGrantsAndOtherStreams(t *testing.T) {
	a1, a2, c1 := Lease{"a", 1}, Lease{"a", 5}, Lease{"c", 3}
	f := newFakeLeases(a2, c1)
	as := NewAttachments(f)
	old := as.Open("a")
	old.Saw(a1)
	got, _ := old.Close(t.Context())
	require.Empty(t, got)

	x, y := as.Open(""), as.Open("c")
	x.Saw(c1)
	y.Saw(c1)
	got, _ = x.Close(t.Context())
	require.Empty(t, got, "another stream still ties c")
	got, _ = y.Close(t.Context())
	require.Equal(t, []Lease{c1}, got)
	require.True(t, f.held[a2])
}

func TestAttachForgetGivesNothingBack(t *testing.T) {
	a1 := Lease{"a", 1}
	f := newFakeLeases(a1)
	as := NewAttachments(f)
	x := as.Open("")
	x.Saw(a1)
	x.Forget()
	require.Zero(t, as.Count())
	got, _ := x.Close(t.Context())
	require.Empty(t, got, "a forgotten attachment is closed")
	require.True(t, f.held[a1])
}

// TestStoppedStreamNeverTiesTheNextOwner: a worker told to stop task a
// whose stream stays open sees the next owner's grant of a through the
// same sidecar; its late close must not give that new lease back.
func TestStoppedStreamNeverTiesTheNextOwner(t *testing.T) {
	old, next := Lease{"a", 1}, Lease{"a", 2}
	f := newFakeLeases(old)
	as := NewAttachments(f)
	x := as.Open("a")
	x.Saw(old)
	x.Stopped("a") // the stream delivered stop for epoch 1
	f.release(old)
	f.mu.Lock()
	f.held[next] = true // the next owner acquired a
	f.mu.Unlock()
	x.Saw(next) // ... and the old stream was told of it
	got, err := x.Close(t.Context())
	require.NoError(t, err)
	require.Empty(t, got, "the next owner's lease was given back by the old worker's stream")
	require.Equal(t, []Lease{next}, f.Held())
}
