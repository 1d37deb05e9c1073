package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fencepost/fencepost/config"
)

// writeConfig writes body into a temp file and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

func TestConfigExampleRoundTrip(t *testing.T) {
	for _, r := range config.Roles() {
		code, out, errOut := runCLI(t, "config", "example", string(r))
		require.Equal(t, exitOK, code, errOut)
		require.Equal(t, config.Example(r), out)

		path := writeConfig(t, out)
		code, out, errOut = runCLI(t, "config", "validate", path)
		require.Equal(t, exitOK, code, errOut)
		require.Equal(t, path+": valid "+string(r)+" configuration\n", out)
	}
}

func TestConfigUsageErrors(t *testing.T) {
	for args, want := range map[string]string{
		"config":                   "fencepost config: missing subcommand (example, validate or keys); run 'fencepost config --help'\n",
		"config frob":              "fencepost config: unknown subcommand \"frob\" (want example, validate or keys); run 'fencepost config --help'\n",
		"config example":           "fencepost config example: needs exactly one ROLE (server, sidecar, fenced or dev); run 'fencepost config example --help'\n",
		"config example bogus":     "fencepost config example: unknown role \"bogus\" (want one of server|sidecar|fenced|dev); run 'fencepost config example --help'\n",
		"config validate":          "fencepost config validate: needs exactly one FILE; run 'fencepost config validate --help'\n",
		"config validate --x f":    "fencepost config validate: flag provided but not defined: -x; run 'fencepost config validate --help'\n",
		"config validate /nonexis": "fencepost config validate: cannot read /nonexis: no such file or directory; run 'fencepost config validate --help'\n",
	} {
		code, out, errOut := runCLI(t, strings.Fields(args)...)
		require.Equal(t, exitUsage, code, args)
		require.Empty(t, out, args)
		require.Equal(t, want, errOut, args)
	}
	code, out, _ := runCLI(t, "config", "validate", "--help")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "fencepost config validate [--role ROLE]")
	require.Contains(t, out, "-runtime")
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	path := writeConfig(t, "raft:\n  electon_timeout: 1s\nleases:\n  profiles:\n    short: {ttl: 20s, heartbeat: 7s}\n")
	code, out, errOut := runCLI(t, "config", "validate", "--role", "server", path)
	require.Equal(t, exitUsage, code)
	require.Empty(t, out)
	require.Equal(t, "fencepost config validate: config: "+path+":2: raft.electon_timeout: unknown key (did you mean \"election_timeout\"?)\n"+
		"fencepost config validate: config: leases.profiles.short.heartbeat: must be <= ttl/3 (ttl 20s → max 6.666s, got 7s)\n", errOut,
		"an unknown key does not hide a broken rule: one pass reports both")

	path = writeConfig(t, "leases:\n  profiles:\n    short: {ttl: 20s, heartbeat: 7s}\nlog: {level: loud}\n")
	code, _, errOut = runCLI(t, "config", "validate", path)
	require.Equal(t, exitUsage, code)
	require.Equal(t, "fencepost config validate: config: leases.profiles.short.heartbeat: must be <= ttl/3 (ttl 20s → max 6.666s, got 7s)\n"+
		"fencepost config validate: config: log.level: must be one of debug, info, warn, error (got \"loud\")\n", errOut)
}

func TestConfigValidateRoleInference(t *testing.T) {
	path := writeConfig(t, "log: {level: debug}\n")
	code, _, errOut := runCLI(t, "config", "validate", path)
	require.Equal(t, exitUsage, code)
	require.Equal(t, "fencepost config validate: "+path+": cannot tell the role from the keys: they fit server, sidecar, fenced, dev; pass --role\n", errOut)

	code, out, errOut := runCLI(t, "config", "validate", "--role=fenced", path)
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, path+": valid fenced configuration\n", out)

	path = writeConfig(t, "raft: [\n")
	code, _, errOut = runCLI(t, "config", "validate", path)
	require.Equal(t, exitUsage, code)
	require.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
	require.Contains(t, errOut, "fencepost config validate: config: "+path+": ")

	code, _, errOut = runCLI(t, "config", "validate", "--role=nope", path)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "unknown role \"nope\"")
}

func TestConfigValidateEnvRuntimeAndPrint(t *testing.T) {
	path := writeConfig(t, "addr: 127.0.0.1:0\n")
	t.Setenv("FENCEPOST_LOG_LEVEL", "warn")

	code, out, errOut := runCLI(t, "config", "validate", "--print", path)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "level: info", "without --env the environment is ignored")
	require.Contains(t, out, "addr: 127.0.0.1:0\n")

	code, out, _ = runCLI(t, "config", "validate", "--env", "--print", path)
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "log:\n  level: warn\n")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	path = writeConfig(t, "addr: "+l.Addr().String()+"\n")
	code, _, errOut = runCLI(t, "config", "validate", path)
	require.Equal(t, exitOK, code, errOut)
	code, _, errOut = runCLI(t, "config", "validate", "--runtime", path)
	require.Equal(t, exitRuntime, code)
	require.Equal(t, "fencepost config validate: config: addr: cannot listen on "+l.Addr().String()+": address already in use (move it with --addr)\n", errOut)
}

func TestConfigKeys(t *testing.T) {
	code, out, errOut := runCLI(t, "config", "keys", "server")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "KEY")
	var line string
	for l := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(l, "raft.election_timeout ") {
			line = l
		}
	}
	require.Equal(t, []string{"raft.election_timeout", "FENCEPOST_RAFT_ELECTION_TIMEOUT", "--raft-election-timeout", "300ms"}, strings.Fields(line)[:4])
	require.Contains(t, out, "--set leases.profiles.*.ttl=...")
}

// The file of issue 16, item 5, replayed: one run of `config validate`
// names every problem (type error, unknown key, rules, missing CA files).
func TestConfigValidateOnePass(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, `cluster: [127.0.0.1:7400]
writes: {rules: [{host: a.example, write: maybe}, {host: b.example}]}
proxy_addr: 0.0.0.0:7480
heartbeat: {drift: 0.5}
tls: {originate: [{host: a.example, ca_file: `+filepath.Join(dir, "a.pem")+`}, {host: b.example, ca_file: `+filepath.Join(dir, "b.pem")+`}]}
`)
	code, out, errOut := runCLI(t, "config", "validate", path)
	require.Equal(t, exitUsage, code)
	require.Empty(t, out)
	p := "fencepost config validate: config: "
	require.Equal(t, p+path+`:2: writes.rules[0].write: must be true or false (got "maybe")`+"\n"+
		p+`proxy_addr: must listen on loopback (127.0.0.1, ::1 or localhost) so only the local worker can use it (got "0.0.0.0:7480")`+"\n"+
		p+"heartbeat.drift: must be between 0 and 0.1 (got 0.5)\n"+
		p+"writes.rules[1].write: must be set to true or false\n"+
		p+"tls.originate[0].ca_file: no such file: "+filepath.Join(dir, "a.pem")+"\n"+
		p+"tls.originate[1].ca_file: no such file: "+filepath.Join(dir, "b.pem")+"\n", errOut)
}

// --runtime reports every host problem, not the first.
func TestConfigValidateRuntimeReportsEvery(t *testing.T) {
	l1, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l1.Close()
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l2.Close()
	file := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	path := writeConfig(t, "node_id: n1\ndata_dir: "+filepath.Join(file, "d")+"\nhttp_addr: "+l1.Addr().String()+
		"\nraft_addr: "+l2.Addr().String()+"\n")
	code, _, errOut := runCLI(t, "config", "validate", "--role", "server", "--runtime", path)
	require.Equal(t, exitRuntime, code, errOut)
	require.Equal(t, 3, strings.Count(errOut, "\n"), errOut)
	require.Contains(t, errOut, "data_dir: cannot use")
	require.Contains(t, errOut, "http_addr: cannot listen on "+l1.Addr().String())
	require.Contains(t, errOut, "raft_addr: cannot listen on "+l2.Addr().String())
}
