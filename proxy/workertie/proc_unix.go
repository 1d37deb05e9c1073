//go:build unix

package workertie

import "syscall"

// killGroup sends sig to the process group led by pid; a group already
// gone is not an error.
func killGroup(pid int, sig syscall.Signal) {
	if pid > 0 && sig != 0 {
		_ = syscall.Kill(-pid, sig)
	}
}
