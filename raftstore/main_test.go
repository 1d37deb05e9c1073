package raftstore

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: every
// Store is closed, and raft, its transport and the verifier stop with it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
