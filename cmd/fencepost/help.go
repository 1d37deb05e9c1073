package main

import (
	"context"
	"fmt"
	"io"
)

// helpUsage is the help text of 'fencepost help'.
const helpUsage = `
Usage: fencepost help [COMMAND]

Without an argument, lists the commands. With one, shows that command's
usage, flags and examples; the same as 'fencepost COMMAND --help'.

Examples:
  fencepost help
  fencepost help config
`

func init() {
	register(&command{
		name:    "help",
		summary: "list the commands, or show one command's usage and examples",
		usage:   helpUsage,
		run:     runHelp,
	})
}

// runHelp prints the overview, or delegates to the command's own --help so
// both ways of asking print exactly the same text.
func runHelp(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("help")
	if code, ok := parseFlags(fs, helpUsage, args, stdout, stderr); !ok {
		return code
	}
	switch fs.NArg() {
	case 0:
		printOverview(stdout)
		return exitOK
	case 1:
		c := commands[fs.Arg(0)]
		if c == nil {
			fmt.Fprintf(stderr, "fencepost: unknown command %q; run 'fencepost help'\n", fs.Arg(0))
			return exitUsage
		}
		return c.run(ctx, []string{"--help"}, stdout, stderr)
	default:
		return usageError(stderr, "help", "takes at most one command name")
	}
}
