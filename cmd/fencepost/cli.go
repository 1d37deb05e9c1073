package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/fencepost/fencepost/config"
)

// Exit codes of every subcommand.
const (
	exitOK      = 0 // success
	exitRuntime = 1 // the command was well formed but failed
	exitUsage   = 2 // bad flags or arguments, or an invalid configuration
)

// command is one subcommand of fencepost. Each one lives in its own file
// (server.go, sidecar.go, ...) and adds itself with register from an init
// function, so adding a subcommand never touches this file.
type command struct {
	// name is the word after "fencepost".
	name string
	// summary is one line for the command list of 'fencepost help'.
	summary string
	// usage is the full help: synopsis, description and examples. The
	// "Flags:" section is appended by parseFlags from the FlagSet.
	usage string
	// run executes the command with the arguments after its name. It
	// returns an exit code; it must write errors as single lines to stderr
	// and never call os.Exit, so tests can run it in-process.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands is the registry filled by register.
var commands = map[string]*command{}

// register adds c to the registry. It panics on a malformed or duplicate
// command, which init-time registration turns into an immediate, obvious
// failure of every test.
func register(c *command) {
	switch {
	case c.name == "" || strings.ContainsAny(c.name, " \t-"):
		panic(fmt.Sprintf("fencepost: bad command name %q", c.name))
	case c.summary == "" || c.usage == "" || c.run == nil:
		panic(fmt.Sprintf("fencepost: command %q needs a summary, a usage and a run func", c.name))
	case commands[c.name] != nil:
		panic(fmt.Sprintf("fencepost: command %q registered twice", c.name))
	}
	commands[c.name] = c
}

// run is the whole binary except os.Exit: it picks the subcommand from args
// and returns its exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	if len(args) == 0 {
		printOverview(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		printOverview(stdout)
		return exitOK
	case "-v", "-version", "--version":
		name, args = "version", []string{"version"}
	}
	if strings.HasPrefix(name, "-") {
		fmt.Fprintf(stderr, "fencepost: unknown flag %q; run 'fencepost help'\n", name)
		return exitUsage
	}
	c := commands[name]
	if c == nil {
		fmt.Fprintf(stderr, "fencepost: unknown command %q; run 'fencepost help'\n", name)
		return exitUsage
	}
	// A panic is a bug; the user still gets one line and an exit code
	// instead of a goroutine dump.
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "fencepost %s: internal error: %v (please report this)\n", name, r)
			code = exitRuntime
		}
	}()
	return c.run(ctx, args[1:], stdout, stderr)
}

// printOverview writes the list of commands.
func printOverview(w io.Writer) {
	fmt.Fprint(w, `fencepost: leases, heartbeats and fencing for AI-agent workers.

Usage:
  fencepost <command> [flags] [arguments]

Commands:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, name := range sortedCommands() {
		fmt.Fprintf(tw, "  %s\t%s\n", name, commands[name].summary)
	}
	_ = tw.Flush()
	fmt.Fprint(w, `
Run 'fencepost <command> --help' for its flags and examples.
Exit codes: 0 ok, 1 runtime error, 2 usage or configuration error.
`)
}

// sortedCommands returns the registered names in order.
func sortedCommands() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// newFlagSet returns a FlagSet for a (sub)command such as "server" or
// "config validate". Its own output is discarded: parseFlags reports errors
// in one line and prints --help itself.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args with fs. When ok is false the command must return
// code at once: exitOK after --help (usage printed to stdout), exitUsage
// after a bad flag (one line on stderr).
func parseFlags(fs *flag.FlagSet, usage string, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return exitOK, true
	case errors.Is(err, flag.ErrHelp):
		printUsage(stdout, fs, usage)
		return exitOK, false
	default:
		return usageError(stderr, fs.Name(), err.Error()), false
	}
}

// printUsage writes usage and, if fs has flags, their defaults.
func printUsage(w io.Writer, fs *flag.FlagSet, usage string) {
	fmt.Fprintln(w, strings.TrimSpace(usage))
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if !hasFlags {
		return
	}
	fmt.Fprint(w, "\nFlags:\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// usageError writes a one-line usage error for the command called name and
// returns exitUsage.
func usageError(stderr io.Writer, name, msg string) int {
	fmt.Fprintf(stderr, "fencepost %s: %s; run 'fencepost %s --help'\n", name, msg, name)
	return exitUsage
}

// reportError writes err to stderr, one line per problem (a config error
// can hold many), each prefixed with "fencepost <name>: ", and returns the
// exit code it deserves: exitUsage for a bad configuration, exitRuntime
// for anything else.
func reportError(stderr io.Writer, name string, err error) int {
	for _, e := range config.Errors(err) {
		for line := range strings.SplitSeq(e.Error(), "\n") {
			fmt.Fprintf(stderr, "fencepost %s: %s\n", name, line)
		}
	}
	return exitCode(err)
}

// exitCode maps an error to an exit code: configuration mistakes are usage
// errors (2), a host that cannot run the configuration and everything else
// are runtime errors (1).
func exitCode(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, config.ErrRuntime):
		return exitRuntime
	case errors.Is(err, config.ErrInvalid), errors.Is(err, config.ErrUnknownKey),
		errors.Is(err, config.ErrSyntax), errors.Is(err, config.ErrRole):
		return exitUsage
	}
	return exitRuntime
}

// loadRole loads the configuration of role from the --config file, the
// process environment and the flags bound with config.BindFlags, then runs
// the host checks (data dir writable, ports free). On failure it reports
// every problem and returns the exit code; the command returns it at once.
//
// A subcommand's run typically does:
//
//	fs := newFlagSet("server")
//	flags := config.BindFlags(fs, config.RoleServer)
//	if code, ok := parseFlags(fs, serverUsage, args, stdout, stderr); !ok {
//		return code
//	}
//	cfg, code := loadRole[*config.Server](config.RoleServer, flags, "server", stderr)
//	if code != exitOK {
//		return code
//	}
func loadRole[T config.Config](role config.Role, flags *config.Flags, name string, stderr io.Writer) (T, int) {
	var zero T
	cfg, err := config.Load(role, config.Source{Env: os.Environ(), Flags: flags})
	if err == nil {
		err = cfg.CheckRuntime()
	}
	if err != nil {
		return zero, reportError(stderr, name, err)
	}
	return cfg.(T), exitOK
}
