package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/fencepost/fencepost/test/scenario"
)

const demoUsage = `Usage: fencepost demo [flags]

Plays the seed article's failure case with the real components, in one
process on loopback: a 3-node lease cluster, two workers A and B each behind
its own sidecar, and the reference fenced service downstream.

  A claims the task, checkpoints and writes; one of A's writes gets stuck on
  the wire; A's link to the cluster drops while A keeps working; A's sidecar
  blocks A's writes once its deadline passes; the cluster moves the lease
  suspect_dead -> expired -> reclaimed; B claims with a higher epoch from A's
  checkpoint and writes; A's link returns and its sidecar still refuses (A
  learns it lost the lease); the stuck write finally arrives and the
  downstream rejects it as stale.

The last line is one JSON object (epochs, writes_accepted,
blocked_by_sidecar, rejected_stale_downstream, accepted_stale,
double_execution, ok). Exit status 0 only when every guarantee held.

--downstream picks the fenced service: go (the reference service, in
process), python (a FastAPI app with the fencepost_fence middleware) or node
(an Express app with @fencepost/fence); the last two run from a fencepost
checkout (--repo, default the current directory), need /usr/bin/python3 with
Debian's python3-fastapi/python3-uvicorn, or Node >= 20 (FENCEPOST_NODE, else
node on PATH) with fence/js built (test/validators.sh builds it).

Examples:
  fencepost demo
  fencepost demo --ttl 10s        # slow the story down to watch it
  fencepost demo --downstream python
  fencepost demo --downstream node
`

func init() {
	register(&command{name: "demo", summary: "play the seed's failure case with real components; exit 0 when every guarantee held", usage: demoUsage, run: runDemo})
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo")
	ttl := fs.Duration("ttl", 2*time.Second, "lease TTL; the heartbeat is TTL/4 and the suspect grace TTL/2")
	task := fs.String("task", scenario.DefaultTask, "task id")
	every := fs.Duration("write-every", 100*time.Millisecond, "how often A tries to write while cut off")
	down := fs.String("downstream", scenario.DownstreamGo, "fenced service: go, python or node")
	repo := fs.String("repo", ".", "fencepost checkout the python and node downstreams run from")
	if code, ok := parseFlags(fs, demoUsage, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, "demo", fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
	cfg := scenario.Config{TTL: *ttl, Task: *task, WriteEvery: *every, Out: stdout, Downstream: *down, Repo: *repo}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "fencepost demo: %v\n", err)
		return exitUsage
	}
	// Bound the run: the story takes a handful of TTLs; a stuck component
	// must end the demo with a reason, not hang it.
	ctx, cancel := context.WithTimeout(ctx, 20**ttl+30*time.Second)
	defer cancel()
	sum, err := scenario.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "fencepost demo: %v\n", err)
		return exitRuntime
	}
	if !sum.OK {
		fmt.Fprintf(stderr, "fencepost demo: guarantees broken: %v\n", sum.Reasons)
		return exitRuntime
	}
	return exitOK
}
