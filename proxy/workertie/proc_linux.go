package workertie

import "syscall"

// childAttr puts the child in its own process group (so a lost lease
// ends its whole tree) and has the kernel kill it if the sidecar dies
// first: a worker never outlives the process that heartbeats for it.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
