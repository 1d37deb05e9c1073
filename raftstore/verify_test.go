package raftstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A waiter that gave up leaves its channel to the round that will still
// answer into it: that answer must never reach a later waiter, whose own
// round has not run (a heartbeat would be acknowledged unverified).
func TestVerifyAbandonedAnswerNeverReachesALaterWaiter(t *testing.T) {
	v := &verifier{kick: make(chan struct{}, 1)}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, v.wait(gone), ErrTimeout)
	v.finish(v.take(), nil) // the round the first waiter left answers it

	<-v.kick // no round runs for the next waiter
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer stop()
	require.ErrorIs(t, v.wait(ctx), ErrTimeout, "a later waiter got the abandoned round's answer")

	// An answered waiter's channel is reused, and carries only its own answer.
	v.finish(v.take(), nil)
	<-v.kick
	done := make(chan error, 1)
	go func() { done <- v.wait(context.Background()) }()
	require.Eventually(t, func() bool { v.mu.Lock(); defer v.mu.Unlock(); return len(v.waiting) == 1 }, time.Second, time.Millisecond)
	v.finish(v.take(), nil)
	require.NoError(t, <-done)
}
