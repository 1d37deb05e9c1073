package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A goal measured in the plaintext pass only must not shift the rows after
// it: each TLS row carries its own target's plaintext figure.
func TestTLSGoalTablePairsByTarget(t *testing.T) {
	plain := &Results{Goals: []Goal{
		{Target: "a", Figure: "plain-a", Status: "met"},
		{Target: "traced", Figure: "plain-traced", Status: "missed"},
		{Target: "rss", Figure: "plain-rss", Status: "missed"},
	}}
	withTLS := &Results{Goals: []Goal{
		{Target: "a", Figure: "tls-a", Status: "met"},
		{Target: "rss", Figure: "tls-rss", Status: "missed"},
		{Target: "only-tls", Figure: "x", Status: "met"},
	}}
	table := tlsGoalTable(plain, withTLS)
	require.Contains(t, table, "| rss | plain-rss | missed | tls-rss | **missed** |", table)
	require.Contains(t, table, "| a | plain-a | met | tls-a | **met** |", table)
	require.NotContains(t, table, "plain-traced", table)
	require.Equal(t, 4, strings.Count(table, "\n"), table)
}
