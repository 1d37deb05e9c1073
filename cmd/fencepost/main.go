// Command fencepost is the single binary of the fencepost project: the lease
// cluster, the sidecar, the embedded dev stack, the demo and the operator CLI.
// It only wires packages together; all logic lives in the packages it calls.
package main

import (
	"fmt"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "version" {
		fmt.Println("fencepost", version)
		return
	}
	fmt.Fprintln(os.Stderr, "usage: fencepost <server|sidecar|dev|demo|ctl|config|version> [flags]")
	os.Exit(2)
}
