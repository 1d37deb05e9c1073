//go:build unix && !linux

package workertie

import "syscall"

// childAttr puts the child in its own process group, so a lost lease ends
// its whole tree. (Only Linux also kills it when the sidecar dies.)
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
