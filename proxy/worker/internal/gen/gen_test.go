package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The files the SDKs read are exactly what the tables give now: a code
// added to fence/lease or the sidecar fails this test until
// `go run ./proxy/worker/internal/gen` is rerun.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	root, err := filepath.Abs("../../../..")
	require.NoError(t, err)
	rs, err := rows(root)
	require.NoError(t, err)
	files, err := outputs(rs)
	require.NoError(t, err)
	for p, want := range files {
		got, err := os.ReadFile(filepath.Join(root, p))
		require.NoError(t, err, "run: go run ./proxy/worker/internal/gen")
		require.Equal(t, string(want), string(got), "%s drifted from the error tables; run: go run ./proxy/worker/internal/gen", p)
	}
}

// Both tables are read: a model code and a sidecar code, with the flags
// the SDKs branch on.
func TestTableHasBothSources(t *testing.T) {
	root, err := filepath.Abs("../../../..")
	require.NoError(t, err)
	rs, err := rows(root)
	require.NoError(t, err)
	by := map[string]Row{}
	for _, r := range rs {
		by[r.Code] = r
	}
	require.Equal(t, Row{Code: "stale_epoch", Name: "StaleEpoch", Source: "model", Status: 409, LeaseLost: true, Doc: "stale epoch"}, by["stale_epoch"])
	require.Equal(t, "sidecar", by["no-session"].Source)
	require.True(t, by["no-session"].Retryable)
	require.True(t, by["lease-revoked"].LeaseLost)
	require.False(t, by["bad-request"].Retryable)
}
