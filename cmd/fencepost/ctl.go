package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/proxy/cluster"
)

// Exit codes of 'fencepost ctl' beyond the common three, so a script can
// tell "no such thing" and "someone else holds it / your epoch is stale"
// apart from a cluster that cannot be reached.
const (
	exitNotFound  = 3 // the task, session or member does not exist
	exitConflict  = 4 // the cluster refused the change in the current state
	exitForbidden = 5 // the caller's certificate (role) may not do this, or there is none
)

// Defaults of the ctl flags.
const (
	ctlDefaultCluster = "127.0.0.1:7400"
	ctlDefaultTimeout = 5 * time.Second
	// ctlClusterEnv names the variable read for --cluster. ctl loads no
	// role configuration, so it reads this one variable itself.
	ctlClusterEnv = config.EnvCluster
	// ctlCAEnv, ctlCertEnv and ctlKeyEnv name the variables read for
	// --ca, --cert and --key.
	ctlCAEnv   = config.EnvCAFile
	ctlCertEnv = config.EnvCertFile
	ctlKeyEnv  = config.EnvKeyFile
	// ctlRetryRounds bounds how many times a call goes round every endpoint.
	// With the client's doubling backoff (25ms..500ms) six rounds wait out a
	// leader election (well under a second) but give up on a cluster that
	// is simply not running in about a second instead of the whole --timeout.
	ctlRetryRounds = 6
)

// ctlCmd is one verb of 'fencepost ctl', such as "tasks list" or "acquire".
type ctlCmd struct {
	// name is the group and verb ("tasks list") or a lone verb ("status").
	name string
	// args names the positional arguments, in order; their count is exact.
	args []string
	// synopsis shows the verb's flags in the command list.
	synopsis string
	// summary is one line for the command list.
	summary string
	// bind defines the verb's flags on fs and returns the action to run
	// once they are parsed.
	bind func(fs *flag.FlagSet) ctlAction
}

// ctlAction performs a verb. It returns what to print and an error; when
// both are set the output is printed before the error is reported (a
// heartbeat that renewed the session but found a lease lost, say).
type ctlAction func(x *ctlCall) (*ctlOut, error)

// ctlCall is what an action works with.
type ctlCall struct {
	ctx    context.Context
	client *cluster.Client
	// shards is the router of --clusters, nil without it; list verbs ask
	// every cluster through it.
	shards *cluster.Shards
	args   []string
	g      *ctlGlobals
	// rid is the request id of the invocation (--request-id or random);
	// see ridCtx.
	rid string
}

// ridCtx returns the context for the call named step. A verb that makes
// several mutations (acquire opens a session, then acquires) gives each its
// own id derived from the invocation's, because the cluster would answer a
// reused id with the first call's result; deriving them keeps a repeated
// --request-id safe for every step.
func (x *ctlCall) ridCtx(step string) context.Context {
	rid := x.rid
	if step != "" {
		rid += "." + step
	}
	return cluster.WithRequestID(x.ctx, rid)
}

// ctlOut is a verb's result: v for -o json, table for people.
type ctlOut struct {
	v     any
	table func(w io.Writer)
}

// ctlGlobals are the flags every verb accepts, before or after its name.
type ctlGlobals struct {
	cluster   string
	clusters  string
	output    string
	timeout   time.Duration
	requestID string
	ca        string
	cert      string
	key       string
}

// bind defines the global flags on fs. Called on the ctl FlagSet and again
// on every verb's, with the values parsed so far as defaults, so
// "ctl -o json tasks list" and "ctl tasks list -o json" mean the same.
func (g *ctlGlobals) bind(fs *flag.FlagSet) {
	fs.StringVar(&g.cluster, "cluster", g.cluster, "cluster members' HTTP addresses, comma-separated (env "+ctlClusterEnv+")")
	fs.StringVar(&g.clusters, "clusters", g.clusters, "several clusters sharing the task-id space, NAME=ADDR,ADDR;NAME=...: task verbs go to the task's cluster, list verbs ask all (env "+ctlClustersEnv+")")
	fs.StringVar(&g.output, "o", g.output, "output format: table or json")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "give up on the cluster after this long")
	fs.StringVar(&g.requestID, "request-id", g.requestID, "request id of the mutation; repeat it after a timeout to apply the change at most once")
	fs.StringVar(&g.ca, "ca", g.ca, "cluster CA certificate: talk HTTPS and verify the cluster with it (env "+ctlCAEnv+")")
	fs.StringVar(&g.cert, "cert", g.cert, "your certificate, e.g. from 'fencepost tls cert create --operator' (env "+ctlCertEnv+")")
	fs.StringVar(&g.key, "key", g.key, "your certificate's key (env "+ctlKeyEnv+")")
}

// tlsConfig returns the client TLS configuration of --ca/--cert/--key,
// nil when none is given (plain HTTP).
func (g *ctlGlobals) tlsConfig() (*tls.Config, error) {
	if g.ca == "" && g.cert == "" && g.key == "" {
		return nil, nil
	}
	if g.ca == "" || g.cert == "" || g.key == "" {
		return nil, errors.New("--ca, --cert and --key go together (TLS needs all three)")
	}
	src, err := pki.NewSource(pki.Files{CA: g.ca, Cert: g.cert, Key: g.key})
	if err != nil {
		return nil, err
	}
	return src.ClientConfig(""), nil
}

// ctlCommands lists every verb, in help order; each is defined in the
// ctl_*.go file of its group.
var ctlCommands = []*ctlCmd{
	ctlStatus, ctlMembersList, ctlMembersAdd, ctlMembersRemove,
	ctlTasksList, ctlTasksGet, ctlTasksCreate, ctlTasksSignal, ctlTasksRevoke, ctlTasksCancel, ctlTasksDelete,
	ctlLeasesList, ctlKeys, ctlSnapshotSave,
	ctlAcquire, ctlClaim, ctlHeartbeat, ctlCheckpoint, ctlWait, ctlRelease, ctlSessionsOpen, ctlSessionsClose,
}

// findCtl returns the verb args start with and how many words named it.
func findCtl(args []string) (*ctlCmd, int) {
	if len(args) >= 2 {
		for _, c := range ctlCommands {
			if c.name == args[0]+" "+args[1] {
				return c, 2
			}
		}
	}
	for _, c := range ctlCommands {
		if len(args) >= 1 && c.name == args[0] {
			return c, 1
		}
	}
	return nil, 0
}

// ctlGroupVerbs returns the verbs of group ("list, get, ...") or "" when
// group is not a group.
func ctlGroupVerbs(group string) string {
	var verbs []string
	for _, c := range ctlCommands {
		if g, v, ok := strings.Cut(c.name, " "); ok && g == group {
			verbs = append(verbs, v)
		}
	}
	return strings.Join(verbs, ", ")
}

const ctlUsageHead = `
Usage: fencepost ctl [--cluster HOST:PORT,...] [-o table|json] [--timeout D] COMMAND [ARGS] [FLAGS]

Operates a running lease cluster through its HTTP API: membership, tasks,
leases, keys, and lease calls for scripts. --cluster lists any members (each
one forwards to the leader); it defaults to $FENCEPOST_CLUSTER, else
127.0.0.1:7400. Output is a table for people or, with -o json, the API's JSON
for scripts. Flags may come before or after the command.

Commands:
`

const ctlUsageTail = `
acquire opens a session and leaves it open, so the lease it prints stays
valid only for its TTL unless renewed: run 'ctl heartbeat --session S
--lease ID:N' more often than its heartbeat interval (it exits 4 once that
lease is lost), and end it with 'ctl release ID --session S --epoch N' (then
'ctl sessions close S').

Exit codes (for scripts):
  0  ok
  1  runtime failure: cluster unreachable or without a leader, timeout
     (outcome unknown: repeat with the same --request-id), internal error
  2  usage: unknown command or flag, bad argument, or an argument the
     cluster refused as malformed (unknown profile, bad id)
  3  not found: no such task or session
  4  conflict: stale epoch, lease held by another session, task waiting,
     final or not claimable yet, not the holder, task already exists;
     heartbeat: a lease named with --lease was lost, revoked or parked
  5  forbidden: the certificate's role lacks the permission (acquire,
     heartbeat, checkpoint and release need a sidecar certificate; revoke,
     cancel, signal and members an operator's), the session belongs to
     another identity, or no certificate was given (401)

Examples:
  fencepost ctl status
  fencepost ctl --ca tls/ca.pem --cert tls/operator-alice.pem --key tls/operator-alice-key.pem status
  fencepost ctl --cluster 10.0.0.1:7400,10.0.0.2:7400 members list
  fencepost ctl members add n4 10.0.0.4:7401 10.0.0.4:7400
  fencepost ctl tasks create run_456 --profile short --payload '{"repo":"x"}'
  fencepost ctl tasks list --state leased -o json | jq -r '.tasks[].taskId'
  fencepost ctl tasks revoke run_456 --reason "stuck for an hour"

  # a lease by hand, from a shell script
  G=$(fencepost ctl acquire run_456 --worker w1 --create -o json)
  SID=$(echo "$G" | jq -r .sessionId); EPOCH=$(echo "$G" | jq .epoch)
  fencepost ctl checkpoint run_456 --session $SID --epoch $EPOCH --step fetched
  fencepost ctl release run_456 --session $SID --epoch $EPOCH --outcome completed
  fencepost ctl sessions close $SID
`

// ctlUsage builds the help of 'fencepost ctl' from the verb table.
func ctlUsage() string {
	var b strings.Builder
	b.WriteString(ctlUsageHead)
	for _, c := range ctlCommands {
		fmt.Fprintf(&b, "  %s\n      %s\n", c.line(), c.summary)
	}
	b.WriteString(ctlUsageTail)
	return b.String()
}

// line is the verb's synopsis: name, arguments and flags.
func (c *ctlCmd) line() string {
	parts := append([]string{c.name}, c.args...)
	if c.synopsis != "" {
		parts = append(parts, c.synopsis)
	}
	return strings.Join(parts, " ")
}

func init() {
	register(&command{name: "ctl", summary: "operate a cluster: status, members, tasks, leases, acquire/release", usage: ctlUsage(), run: runCtl})
}

// runCtl parses the global flags, finds the verb and runs it.
func runCtl(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := &ctlGlobals{cluster: ctlDefaultCluster, output: "table", timeout: ctlDefaultTimeout}
	if env := os.Getenv(ctlClusterEnv); env != "" {
		g.cluster = env
	}
	g.ca, g.cert, g.key = os.Getenv(ctlCAEnv), os.Getenv(ctlCertEnv), os.Getenv(ctlKeyEnv)
	g.clusters = os.Getenv(ctlClustersEnv)
	fs := newFlagSet("ctl")
	g.bind(fs)
	if code, ok := parseFlags(fs, ctlUsage(), args, stdout, stderr); !ok {
		return code
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usageError(stderr, "ctl", "missing command")
	}
	c, n := findCtl(rest)
	if c == nil {
		if verbs := ctlGroupVerbs(rest[0]); verbs != "" {
			if len(rest) == 1 {
				return usageError(stderr, "ctl", fmt.Sprintf("%s: missing verb (want %s)", rest[0], verbs))
			}
			return usageError(stderr, "ctl", fmt.Sprintf("%s: unknown verb %q (want %s)", rest[0], rest[1], verbs))
		}
		return usageError(stderr, "ctl", fmt.Sprintf("unknown command %q", rest[0]))
	}
	return runCtlCmd(ctx, c, g, rest[n:], stdout, stderr)
}

// runCtlCmd parses a verb's flags and arguments, calls the cluster and
// prints the result or the error.
func runCtlCmd(ctx context.Context, c *ctlCmd, g *ctlGlobals, args []string, stdout, stderr io.Writer) int {
	name := "ctl " + c.name
	fs := newFlagSet(name)
	g.bind(fs)
	action := c.bind(fs)
	usage := fmt.Sprintf("Usage: fencepost ctl %s\n\n%s%s.\nRun 'fencepost ctl --help' for the global flags and exit codes.", c.line(), strings.ToUpper(c.summary[:1]), c.summary[1:])
	pos, err := parseInterspersed(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printUsage(stdout, fs, usage)
		return exitOK
	case err != nil:
		return usageError(stderr, name, err.Error())
	case len(pos) != len(c.args):
		want := "no arguments"
		if len(c.args) > 0 {
			want = strings.Join(c.args, " ")
		}
		return usageError(stderr, name, fmt.Sprintf("want %s, got %d argument(s)", want, len(pos)))
	case g.output != "table" && g.output != "json":
		return usageError(stderr, name, fmt.Sprintf("-o %q: want table or json", g.output))
	case g.timeout <= 0:
		return usageError(stderr, name, "--timeout must be positive")
	}
	endpoints := splitEndpoints(g.cluster)
	if len(endpoints) == 0 {
		return usageError(stderr, name, "--cluster: no endpoint given")
	}
	tc, err := g.tlsConfig()
	if err != nil {
		return usageError(stderr, name, err.Error())
	}
	newClient := func(endpoints []string) (*cluster.Client, error) {
		return cluster.New(cluster.Config{
			TLS:         tc,
			Endpoints:   endpoints,
			Timeout:     min(g.timeout, cluster.DefaultTimeout),
			CallTimeout: g.timeout,
			Retries:     ctlRetryRounds * len(endpoints),
		})
	}
	client, err := newClient(endpoints)
	if err != nil {
		return usageError(stderr, name, "--cluster: "+strings.TrimPrefix(err.Error(), "cluster: invalid config: "))
	}
	defer client.Close()
	var shards *cluster.Shards
	if g.clusters != "" {
		if shards, err = shardsFor(g.clusters, newClient); err != nil {
			return usageError(stderr, name, err.Error())
		}
		for _, sh := range shards.All() {
			defer sh.Client.Close()
		}
		switch {
		case len(c.args) > 0 && c.args[0] == "ID":
			lctx, cancel := context.WithTimeout(ctx, g.timeout)
			sh, err := shards.Locate(lctx, pos[0])
			cancel()
			if err != nil {
				return reportCtlError(stderr, name, g, "", err)
			}
			client = sh.Client
		case !ctlAcrossShards[c.name]:
			return usageError(stderr, name, "--clusters: this command concerns one cluster; give it --cluster instead")
		}
	}
	cctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	x := &ctlCall{ctx: cctx, client: client, shards: shards, args: pos, g: g, rid: g.requestID}
	if x.rid == "" {
		x.rid = newRequestID()
	}
	out, err := action(x)
	if out != nil {
		if perr := printCtlOut(stdout, g.output, out); perr != nil {
			fmt.Fprintf(stderr, "fencepost ctl: write output: %v\n", perr)
			return exitRuntime
		}
	}
	if err != nil {
		return reportCtlError(stderr, name, g, x.rid, err)
	}
	return exitOK
}

// parseInterspersed parses fs from args, allowing flags after positional
// arguments ("tasks get run_1 -o json"), which the flag package alone does
// not. Everything after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// splitEndpoints splits a comma-separated --cluster value.
func splitEndpoints(s string) []string {
	var out []string
	for ep := range strings.SplitSeq(s, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			out = append(out, ep)
		}
	}
	return out
}

// newRequestID returns a random request id. ctl picks it (rather than
// letting the client do so) so that a timeout can tell the user which id
// to repeat.
func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "ctl-" + hex.EncodeToString(b[:])
}
