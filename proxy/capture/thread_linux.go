//go:build linux

package capture

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// threadSetUID changes the calling OS thread's uid only: the raw syscall,
// because the libc and Go wrappers change every thread of the process.
// The caller has locked the thread and never unlocks it.
func threadSetUID(uid int) error {
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), ^uintptr(0)); errno != 0 {
		return fmt.Errorf("setresuid %d: %w", uid, errno)
	}
	return nil
}

// threadSetns moves the calling OS thread into the named network
// namespace. The caller has locked the thread and never unlocks it.
func threadSetns(name string) error {
	f, err := os.Open("/run/netns/" + name)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns %s: %w", name, err)
	}
	return nil
}
