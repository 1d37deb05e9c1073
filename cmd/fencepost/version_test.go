package main

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVersionText(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.99",
		Main:      debug.Module{Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc123"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	require.Equal(t, "fencepost v1.2.3\ngo:       go1.99\nplatform: "+platform+
		"\nrevision: abc123 (modified)\ncommit:   2026-01-02T03:04:05Z\n", versionText(bi, true))

	require.Equal(t, "fencepost dev\ngo:       "+runtime.Version()+"\nplatform: "+platform+"\n", versionText(nil, false))

	old := version
	version = "v9.9.9"
	t.Cleanup(func() { version = old })
	require.Contains(t, versionText(bi, true), "fencepost v9.9.9\n", "-ldflags wins over the module version")
}

func TestVersionCommand(t *testing.T) {
	old := readBuildInfo
	readBuildInfo = func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "feed"}}}, true
	}
	t.Cleanup(func() { readBuildInfo = old })

	for _, args := range [][]string{{"version"}, {"--version"}, {"-v"}} {
		code, out, errOut := runCLI(t, args...)
		require.Equal(t, exitOK, code, args)
		require.Empty(t, errOut)
		require.Contains(t, out, "fencepost dev\n", args)
		require.Contains(t, out, "revision: feed\n", args)
	}
	code, _, errOut := runCLI(t, "version", "extra")
	require.Equal(t, exitUsage, code)
	require.Equal(t, "fencepost version: takes no arguments; run 'fencepost version --help'\n", errOut)
}
