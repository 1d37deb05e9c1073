// Command fencepost is the single binary of the fencepost project: the lease
// cluster, the sidecar, the embedded dev stack, the demo and the operator CLI.
// It only wires packages together; all logic lives in the packages it calls.
//
// Each subcommand lives in its own file and registers itself in init with
// register (see cli.go); main only builds the signal-aware context and turns
// the result of run into the exit code.
package main

import (
	"context"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signalContext(context.Background())
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
