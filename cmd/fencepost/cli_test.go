package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/fencepost/fencepost/config"
)

// runCLI runs the binary in-process and returns its exit code and output.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// addCommand registers a command for one test.
func addCommand(t *testing.T, c *command) {
	t.Helper()
	register(c)
	t.Cleanup(func() { delete(commands, c.name) })
}

func TestNoArgumentsPrintsOverviewAndFails(t *testing.T) {
	code, out, errOut := runCLI(t)
	require.Equal(t, exitUsage, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "Commands:")
}

func TestHelpListsEveryCommand(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		code, out, errOut := runCLI(t, args...)
		require.Equal(t, exitOK, code, args)
		require.Empty(t, errOut)
		for name, c := range commands {
			require.Contains(t, out, name, args)
			require.Contains(t, out, c.summary, args)
		}
	}
}

func TestUnknownCommandAndFlag(t *testing.T) {
	code, out, errOut := runCLI(t, "x")
	require.Equal(t, exitUsage, code)
	require.Empty(t, out)
	require.Equal(t, "fencepost: unknown command \"x\"; run 'fencepost help'\n", errOut)

	code, _, errOut = runCLI(t, "--bogus")
	require.Equal(t, exitUsage, code)
	require.Equal(t, "fencepost: unknown flag \"--bogus\"; run 'fencepost help'\n", errOut)

	code, _, errOut = runCLI(t, "help", "x")
	require.Equal(t, exitUsage, code)
	require.Equal(t, "fencepost: unknown command \"x\"; run 'fencepost help'\n", errOut)

	code, _, errOut = runCLI(t, "help", "x", "y")
	require.Equal(t, exitUsage, code)
	require.Equal(t, "fencepost help: takes at most one command name; run 'fencepost help --help'\n", errOut)
}

func TestCommandHelpTwoWaysSameText(t *testing.T) {
	for name := range commands {
		code, viaFlag, errOut := runCLI(t, name, "--help")
		require.Equal(t, exitOK, code, name)
		require.Empty(t, errOut, name)
		require.Contains(t, viaFlag, "Usage", name)
		require.Contains(t, viaFlag, "Examples:", name)

		code, viaHelp, _ := runCLI(t, "help", name)
		require.Equal(t, exitOK, code, name)
		require.Equal(t, viaFlag, viaHelp, name)
	}
}

func TestBadFlagIsOneLine(t *testing.T) {
	code, out, errOut := runCLI(t, "version", "--nope")
	require.Equal(t, exitUsage, code)
	require.Empty(t, out)
	require.Equal(t, "fencepost version: flag provided but not defined: -nope; run 'fencepost version --help'\n", errOut)
}

func TestRegisterRejectsBadCommands(t *testing.T) {
	noop := func(context.Context, []string, io.Writer, io.Writer) int { return 0 }
	require.Panics(t, func() { register(&command{name: "config", summary: "s", usage: "u", run: noop}) })
	require.Panics(t, func() { register(&command{name: "", summary: "s", usage: "u", run: noop}) })
	require.Panics(t, func() { register(&command{name: "a b", summary: "s", usage: "u", run: noop}) })
	require.Panics(t, func() { register(&command{name: "fresh", summary: "s", usage: "u"}) })
	require.NotContains(t, commands, "fresh")
}

func TestRegisteredCommandRunsWithFlagsAndConfig(t *testing.T) {
	const usage = "Usage: fencepost probe [flags]\n\nExamples:\n  fencepost probe --log-level=debug\n"
	var got *config.Fenced
	addCommand(t, &command{name: "probe", summary: "test command", usage: usage,
		run: func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
			fs := newFlagSet("probe")
			flags := config.BindFlags(fs, config.RoleFenced)
			if code, ok := parseFlags(fs, usage, args, stdout, stderr); !ok {
				return code
			}
			cfg, code := loadRole[*config.Fenced](config.RoleFenced, flags, "probe", stderr)
			if code != exitOK {
				return code
			}
			got = cfg
			return exitOK
		}})
	t.Setenv("FENCEPOST_LOG_FORMAT", "console")

	code, _, errOut := runCLI(t, "probe", "--addr=127.0.0.1:0", "--log-level=debug")
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, "debug", got.Log.Level)
	require.Equal(t, "console", got.Log.Format)

	code, out, _ := runCLI(t, "probe", "--help")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "Flags:\n")
	require.Contains(t, out, "(string; env FENCEPOST_ADDR) (default 127.0.0.1:7490)")

	t.Setenv("FENCEPOST_LOG_LEVEL", "loud")
	code, _, errOut = runCLI(t, "probe", "--require-signature")
	require.Equal(t, exitUsage, code)
	require.Equal(t, "fencepost probe: config: require_signature: needs keys_from: signatures are checked against the cluster's public keys\n"+
		"fencepost probe: config: log.level: must be one of debug, info, warn, error (got \"loud\")\n", errOut)
}

func TestLoadRoleRuntimeFailureIsExit1(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	fs := newFlagSet("dev")
	flags := config.BindFlags(fs, config.RoleDev)
	require.NoError(t, fs.Parse([]string{"--data-dir", filepath.Join(file, "x"), "--ports-http=0", "--ports-raft=0",
		"--ports-proxy=0", "--ports-control=0", "--ports-fenced=0", "--ports-fenced-tls=0", "--ports-console=0"}))
	var errOut bytes.Buffer
	_, code := loadRole[*config.Dev](config.RoleDev, flags, "dev", &errOut)
	require.Equal(t, exitRuntime, code)
	require.Equal(t, "fencepost dev: config: data_dir: cannot use "+filepath.Join(file, "x")+": not a directory\n", errOut.String())
}

func TestPanicBecomesOneLine(t *testing.T) {
	addCommand(t, &command{name: "boom", summary: "s", usage: "u",
		run: func(context.Context, []string, io.Writer, io.Writer) int { panic("kaput") }})
	code, _, errOut := runCLI(t, "boom")
	require.Equal(t, exitRuntime, code)
	require.Equal(t, "fencepost boom: internal error: kaput (please report this)\n", errOut)
}

func TestExitCodeMapping(t *testing.T) {
	require.Equal(t, exitOK, exitCode(nil))
	require.Equal(t, exitUsage, exitCode(config.ErrInvalid))
	require.Equal(t, exitUsage, exitCode(config.ErrSyntax))
	require.Equal(t, exitRuntime, exitCode(config.ErrRuntime))
	require.Equal(t, exitRuntime, exitCode(io.ErrUnexpectedEOF))
}

func TestNewLogger(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(config.Log{Level: "info", Format: "json"}, &buf)
	require.NoError(t, err)
	log.Debug("hidden")
	log.Info("shown", zap.String("k", "v"))
	require.NoError(t, log.Sync())
	var rec map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rec), buf.String())
	require.Equal(t, "shown", rec["msg"])
	require.Equal(t, "info", rec["level"])
	require.Equal(t, "v", rec["k"])
	require.Contains(t, rec, "ts")

	buf.Reset()
	log, err = newLogger(config.Log{Level: "debug", Format: "console"}, &buf)
	require.NoError(t, err)
	log.Debug("hello")
	require.Contains(t, buf.String(), "DEBUG")
	require.Contains(t, buf.String(), "hello")
	require.False(t, json.Valid(bytes.TrimSpace(buf.Bytes())))

	_, err = newLogger(config.Log{Level: "loud", Format: "json"}, &buf)
	require.ErrorContains(t, err, "log.level")
	_, err = newLogger(config.Log{Level: "info", Format: "xml"}, &buf)
	require.ErrorContains(t, err, "log.format")
}

func TestSignalContextCancelsOnSIGTERM(t *testing.T) {
	ctx, stop := signalContext(t.Context())
	defer stop()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	<-ctx.Done()
	require.ErrorIs(t, ctx.Err(), context.Canceled)
}

// TestBinaryUnknownFlag builds the real binary once to prove main wires run
// to the exit code and stderr.
func TestBinaryUnknownFlag(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH")
	}
	bin := filepath.Join(t.TempDir(), "fencepost")
	build := exec.CommandContext(t.Context(), gobin, "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))

	for _, args := range [][]string{{"--bogus"}, {"version", "--bogus"}, {"nope"}} {
		cmd := exec.CommandContext(t.Context(), bin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err = cmd.Run()
		exitErr, ok := err.(*exec.ExitError)
		require.True(t, ok, "%v: %v", args, err)
		require.Equal(t, exitUsage, exitErr.ExitCode(), args)
		require.Empty(t, stdout.String(), args)
		require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "%v: %q", args, stderr.String())
		require.True(t, strings.HasPrefix(stderr.String(), "fencepost"), args)
	}

	cmd := exec.CommandContext(t.Context(), bin, "version")
	out, err = cmd.Output()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(out), "fencepost "), string(out))
}
