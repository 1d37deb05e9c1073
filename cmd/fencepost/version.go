package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// versionUsage is the help text of 'fencepost version'.
const versionUsage = `
Usage: fencepost version

Prints the fencepost version, the Go version it was built with, the target
platform and, when the binary was built from a VCS checkout, the revision,
its commit time and whether the tree had local changes.

Examples:
  fencepost version
  fencepost --version
`

func init() {
	register(&command{
		name:    "version",
		summary: "print version, Go version and VCS revision",
		usage:   versionUsage,
		run:     runVersion,
	})
}

// readBuildInfo is replaceable in tests; test binaries carry no VCS stamp.
var readBuildInfo = debug.ReadBuildInfo

// runVersion prints the build description.
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version")
	if code, ok := parseFlags(fs, versionUsage, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, "version", "takes no arguments")
	}
	fmt.Fprint(stdout, versionText(readBuildInfo()))
	return exitOK
}

// versionText renders the version lines from the -ldflags version and the
// build info, if any.
func versionText(bi *debug.BuildInfo, ok bool) string {
	v := version
	settings := map[string]string{}
	goVersion := runtime.Version()
	if ok && bi != nil {
		// "go install module@v1.2.3" stamps the module version; prefer it
		// over the placeholder when no -ldflags version was given.
		if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
	}
	out := fmt.Sprintf("fencepost %s\ngo:       %s\nplatform: %s/%s\n", v, goVersion, runtime.GOOS, runtime.GOARCH)
	if rev := settings["vcs.revision"]; rev != "" {
		if settings["vcs.modified"] == "true" {
			rev += " (modified)"
		}
		out += "revision: " + rev + "\n"
	}
	if t := settings["vcs.time"]; t != "" {
		out += "commit:   " + t + "\n"
	}
	return out
}
