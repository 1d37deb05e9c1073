package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// selfCommand returns how a person types this very binary in another shell,
// so the commands `fencepost dev` prints work as printed however it was
// started:
//
//   - "fencepost" when that name on PATH is this binary;
//   - under `go run`, whose binary is deleted when it exits, a copy kept in
//     dir (dev's data directory) and named by its absolute path;
//   - otherwise the absolute path of this binary ("./bin/fencepost dev"
//     started from another directory).
func selfCommand(dir string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locate this binary: %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	return chooseSelfCommand(exe, dir, exec.LookPath, copyExecutable)
}

// chooseSelfCommand is selfCommand with its effects passed in, for tests.
func chooseSelfCommand(exe, dir string, lookPath func(string) (string, error), copyTo func(src, dst string) error) (string, error) {
	if p, err := lookPath("fencepost"); err == nil && sameFile(p, exe) {
		return "fencepost", nil
	}
	if isGoRunBinary(exe) {
		abs, err := filepath.Abs(filepath.Join(dir, "bin", "fencepost"))
		if err != nil {
			return "", err
		}
		if err := copyTo(exe, abs); err != nil {
			return "", fmt.Errorf("keep a copy of this go run binary for the printed commands: %w", err)
		}
		exe = abs
	}
	return shellQuote(exe), nil
}

// isGoRunBinary reports whether exe was built by `go run`: linked into a
// temporary ".../go-buildNNN/bNNN/exe/NAME" that go run removes on exit, or
// (Go 1.24 and later) kept in the build cache as "GOCACHE/xx/HASH-d/NAME",
// which `go clean -cache` or the cache's trimming may remove at any time.
func isGoRunBinary(exe string) bool {
	dir := filepath.Dir(exe)
	if filepath.Base(dir) == "exe" && strings.Contains(filepath.ToSlash(dir), "/go-build") {
		return true
	}
	hash, ok := strings.CutSuffix(filepath.Base(dir), "-d")
	shard := filepath.Base(filepath.Dir(dir))
	return ok && len(hash) == 64 && isHex(hash) && len(shard) == 2 && strings.HasPrefix(hash, shard)
}

// isHex reports whether s is lower-case hexadecimal.
func isHex(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') })
}

// sameFile reports whether two paths name one file.
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// copyExecutable copies src to dst (mode 0755) through a temporary file and
// a rename, so a copy still running from an earlier dev is never
// overwritten in place.
func copyExecutable(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".fencepost-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := io.Copy(tmp, in); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o755); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// shellQuote quotes a path for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:@%", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
