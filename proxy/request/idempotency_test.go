package request

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestKeyDerivation(t *testing.T) {
	k := ActionKey("task-1", "send-email-42")
	require.Len(t, k, len(keyPrefix)+32)
	require.Equal(t, k, ActionKey("task-1", "send-email-42"))
	require.NotEqual(t, k, ActionKey("task-2", "send-email-42"))
	require.NotEqual(t, OrdinalKey("t", 1, 2), OrdinalKey("t", 2, 1))
	require.NotEqual(t, OrdinalKey("t", 12, 3), OrdinalKey("t", 1, 23))
	// The two derivations live in separate spaces.
	require.NotEqual(t, ActionKey("t", "1"), OrdinalKey("t", 0, 1))
}
