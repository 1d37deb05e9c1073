package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSelfCommandWorksAsPrinted(t *testing.T) {
	dir := t.TempDir()
	onPath := filepath.Join(dir, "path", "fencepost")
	require.NoError(t, os.MkdirAll(filepath.Dir(onPath), 0o755))
	require.NoError(t, os.WriteFile(onPath, []byte("#!/bin/sh\n"), 0o755))
	noPath := func(string) (string, error) { return "", errors.New("not found") }
	found := func(string) (string, error) { return onPath, nil }
	noCopy := func(string, string) error { t.Fatal("copied"); return nil }

	// The binary on PATH: its plain name.
	got, err := chooseSelfCommand(onPath, dir, found, noCopy)
	require.NoError(t, err)
	require.Equal(t, "fencepost", got)

	// Another binary of that name elsewhere (./bin/fencepost): its absolute path.
	got, err = chooseSelfCommand("/work/my repo/bin/fencepost", dir, found, noCopy)
	require.NoError(t, err)
	require.Equal(t, `'/work/my repo/bin/fencepost'`, got)

	// go run, both layouts: a copy kept in the data dir, by absolute path,
	// runnable after the original is gone.
	for _, exe := range []string{
		filepath.Join(dir, "go-build123", "b001", "exe", "fencepost"),
		filepath.Join(dir, "cache", "47", "47784d5e4882bf1f1247a18194d41bc8e721f532f149a850423e057d1def412a-d", "fencepost"),
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(exe), 0o755))
		require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\necho it runs\n"), 0o755))
		got, err = chooseSelfCommand(exe, filepath.Join(dir, "data"), noPath, copyExecutable)
		require.NoError(t, err)
		require.Equal(t, filepath.Join(dir, "data", "bin", "fencepost"), got)
		require.NoError(t, os.Remove(exe))
		fi, err := os.Stat(got)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
	}
	require.False(t, isGoRunBinary("/usr/local/bin/fencepost"))
	require.False(t, isGoRunBinary("/home/u/cache/ab/notahash-d/fencepost"))
}
