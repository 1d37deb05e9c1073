package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"gopkg.in/yaml.v3"

	"github.com/fencepost/fencepost/config"
)

// configUsage is the help text of 'fencepost config'.
const configUsage = `
Usage:
  fencepost config example ROLE
  fencepost config validate [--role ROLE] [--env] [--runtime] [--print] FILE
  fencepost config keys ROLE

Roles: server, sidecar, fenced, dev. Each role reads one YAML file; values
are layered defaults < file < FENCEPOST_* environment < flags. Every key has
an environment variable (raft.election_timeout -> FENCEPOST_RAFT_ELECTION_TIMEOUT)
and a flag (--raft-election-timeout); 'config keys' lists them all.

  example   writes a commented file with every key and its default; it
            validates as is.
  validate  checks FILE alone (no environment, no flags) so a file meant for
            another host can be checked here. The role comes from --role or,
            when omitted, from the file's top-level keys; a file whose keys
            fit several roles (only log:, say) needs --role. Every problem is
            printed on its own line. --env also applies this process's
            FENCEPOST_* variables; --runtime also checks this host (data dir
            writable, ports free); --print writes the effective configuration.
            Exit 0 when valid, 2 when not, 1 when only --runtime failed.
  keys      lists every key of ROLE with its environment variable, flag and
            default.

Examples:
  fencepost config example server > server.yaml
  fencepost config validate server.yaml
  fencepost config validate --role sidecar --runtime --print sidecar.yaml
  fencepost config keys sidecar
`

func init() {
	register(&command{
		name:    "config",
		summary: "write an example config file, validate one, or list the keys",
		usage:   configUsage,
		run:     runConfig,
	})
}

// runConfig dispatches to the config subcommands.
func runConfig(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("config")
	if code, ok := parseFlags(fs, configUsage, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() == 0 {
		return usageError(stderr, "config", "missing subcommand (example, validate or keys)")
	}
	sub, rest := fs.Arg(0), fs.Args()[1:]
	switch sub {
	case "example":
		return runConfigExample(rest, stdout, stderr)
	case "validate":
		return runConfigValidate(rest, stdout, stderr)
	case "keys":
		return runConfigKeys(rest, stdout, stderr)
	}
	return usageError(stderr, "config", fmt.Sprintf("unknown subcommand %q (want example, validate or keys)", sub))
}

// roleArg parses the single ROLE argument of 'config example' and 'config
// keys'.
func roleArg(name string, args []string, stdout, stderr io.Writer) (config.Role, int, bool) {
	fs := newFlagSet(name)
	if code, ok := parseFlags(fs, configUsage, args, stdout, stderr); !ok {
		return "", code, false
	}
	if fs.NArg() != 1 {
		return "", usageError(stderr, name, "needs exactly one ROLE (server, sidecar, fenced or dev)"), false
	}
	role, err := config.ParseRole(fs.Arg(0))
	if err != nil {
		return "", usageError(stderr, name, strings.TrimPrefix(err.Error(), "config: ")), false
	}
	return role, exitOK, true
}

// runConfigExample prints the example file of a role.
func runConfigExample(args []string, stdout, stderr io.Writer) int {
	role, code, ok := roleArg("config example", args, stdout, stderr)
	if !ok {
		return code
	}
	fmt.Fprint(stdout, config.Example(role))
	return exitOK
}

// runConfigKeys prints the key table of a role.
func runConfigKeys(args []string, stdout, stderr io.Writer) int {
	role, code, ok := roleArg("config keys", args, stdout, stderr)
	if !ok {
		return code
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tENV\tFLAG\tDEFAULT\tDESCRIPTION")
	for _, k := range config.Keys(role) {
		flagText := "--set " + k.Name + "=..."
		if k.Flag != "" {
			flagText = "--" + k.Flag
		}
		def := k.Default
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.Name, k.Env, flagText, def, k.Doc)
	}
	_ = tw.Flush()
	return exitOK
}

// runConfigValidate checks one file.
func runConfigValidate(args []string, stdout, stderr io.Writer) int {
	const name = "config validate"
	fs := newFlagSet(name)
	roleName := fs.String("role", "", "`role` of the file: server, sidecar, fenced or dev (default: inferred from the keys)")
	withEnv := fs.Bool("env", false, "also apply this process's FENCEPOST_* environment variables")
	runtimeCheck := fs.Bool("runtime", false, "also check this host: data dir writable, ports free, files readable")
	printCfg := fs.Bool("print", false, "write the effective configuration (defaults filled in) to stdout")
	if code, ok := parseFlags(fs, configUsage, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(stderr, name, "needs exactly one FILE")
	}
	path := fs.Arg(0)
	data, err := os.ReadFile(path)
	if err != nil {
		return usageError(stderr, name, "cannot read "+path+": "+errCause(err))
	}
	var role config.Role
	if *roleName != "" {
		if role, err = config.ParseRole(*roleName); err != nil {
			return usageError(stderr, name, strings.TrimPrefix(err.Error(), "config: "))
		}
	} else if role, err = config.InferRole(data); err != nil {
		if !errors.Is(err, config.ErrSyntax) {
			fmt.Fprintf(stderr, "fencepost %s: %s: %s; pass --role\n", name, path, strings.TrimPrefix(err.Error(), "config: "))
			return exitUsage
		}
		// Not YAML at all: any role's loader reports the syntax error
		// with the file name and line, so pick one and carry on.
		role = config.RoleServer
	}
	src := config.Source{Path: path}
	if *withEnv {
		src.Env = os.Environ()
	}
	cfg, err := config.Load(role, src)
	if err != nil {
		return reportError(stderr, name, err)
	}
	if *runtimeCheck {
		if err := cfg.CheckRuntime(); err != nil {
			return reportError(stderr, name, err)
		}
	}
	if *printCfg {
		enc := yaml.NewEncoder(stdout)
		enc.SetIndent(2)
		if err := enc.Encode(cfg); err != nil {
			return reportError(stderr, name, err)
		}
		return exitOK
	}
	fmt.Fprintf(stdout, "%s: valid %s configuration\n", path, role)
	return exitOK
}

// errCause drops the path an *os.PathError repeats.
func errCause(err error) string {
	if pe, ok := errors.AsType[*os.PathError](err); ok {
		return pe.Err.Error()
	}
	return err.Error()
}
