package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stubHost makes the derived node id deterministic.
func stubHost(t *testing.T, name string) {
	t.Helper()
	old := hostname
	hostname = func() (string, error) { return name, nil }
	t.Cleanup(func() { hostname = old })
}

// writeFile writes a config file into a temp dir and returns its path.
func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

// lines renders an error as its one-line parts.
func lines(err error) []string {
	var out []string
	for _, e := range Errors(err) {
		out = append(out, e.Error())
	}
	return out
}

func TestLoadServerDefaults(t *testing.T) {
	stubHost(t, "Worker_Box.example.com")
	s, err := LoadServer(Source{})
	require.NoError(t, err)
	require.Equal(t, "worker-box.example.com", s.NodeID)
	require.Equal(t, "./fencepost-data/worker-box.example.com", s.DataDir)
	require.Equal(t, "127.0.0.1:7401", s.RaftAdvertise)
	require.True(t, s.ShouldBootstrap())
	require.Equal(t, 300*time.Millisecond, s.Raft.ElectionTimeout.Std())
	require.Equal(t, Profile{TTL: Duration(21 * time.Second), Heartbeat: Duration(7 * time.Second)}, s.Leases.Profiles["short"])
	require.Equal(t, ByteSize(1<<20), s.Leases.CheckpointMaxBytes)
}

func TestPrecedenceFlagsEnvFileDefaults(t *testing.T) {
	stubHost(t, "n1")
	path := writeFile(t, "server.yaml", "raft:\n  election_timeout: 400ms\nlog:\n  level: warn\n")
	env := []string{"FENCEPOST_RAFT_ELECTION_TIMEOUT=500ms", "FENCEPOST_LOG_FORMAT=console", "PATH=/bin"}

	load := func(args ...string) *Server {
		t.Helper()
		fs := flag.NewFlagSet("server", flag.ContinueOnError)
		f := BindFlags(fs, RoleServer)
		require.NoError(t, fs.Parse(args))
		s, err := LoadServer(Source{Path: path, Env: env, Flags: f})
		require.NoError(t, err)
		return s
	}
	s := load("--raft-election-timeout=600ms")
	require.Equal(t, Duration(600*time.Millisecond), s.Raft.ElectionTimeout, "flag beats env")
	require.Equal(t, "warn", s.Log.Level, "file beats default")
	require.Equal(t, "console", s.Log.Format, "env beats default")
	require.Equal(t, Duration(100*time.Millisecond), s.Raft.HeartbeatTimeout, "default survives")

	s = load()
	require.Equal(t, Duration(500*time.Millisecond), s.Raft.ElectionTimeout, "env beats file")

	env = nil
	s = load("--log-level", "error")
	require.Equal(t, Duration(400*time.Millisecond), s.Raft.ElectionTimeout, "file beats default")
	require.Equal(t, "error", s.Log.Level, "flag beats file")
}

func TestConfigPathFromFlagAndEnv(t *testing.T) {
	stubHost(t, "n1")
	path := writeFile(t, "s.yaml", "node_id: from-file\n")
	s, err := LoadServer(Source{Env: []string{EnvConfigPath + "=" + path}})
	require.NoError(t, err)
	require.Equal(t, "from-file", s.NodeID)

	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	f := BindFlags(fs, RoleServer)
	require.NoError(t, fs.Parse([]string{"--config", path}))
	require.Equal(t, path, f.Path())
	s, err = LoadServer(Source{Flags: f, Env: []string{EnvConfigPath + "=/nonexistent"}})
	require.NoError(t, err)
	require.Equal(t, "from-file", s.NodeID)
}

func TestMissingFile(t *testing.T) {
	_, err := LoadServer(Source{Path: filepath.Join(t.TempDir(), "nope.yaml")})
	require.ErrorIs(t, err, ErrSyntax)
	require.Contains(t, err.Error(), "cannot read config file: no such file or directory")
	require.NotContains(t, err.Error(), "\n")
}

func TestUnknownKeysAllReportedWithLineAndHint(t *testing.T) {
	body := "node_id: a\nraft:\n  electon_timeout: 1s\nleases:\n  profiles:\n    short: {ttl: 30s, hartbeat: 5s}\nbogus: 1\n"
	_, err := Parse(RoleServer, []byte(body), "s.yaml")
	require.ErrorIs(t, err, ErrUnknownKey)
	require.Equal(t, []string{
		`config: s.yaml:3: raft.electon_timeout: unknown key (did you mean "election_timeout"?)`,
		`config: s.yaml:6: leases.profiles.short.hartbeat: unknown key (did you mean "heartbeat"?)`,
		`config: s.yaml:7: bogus: unknown key (known keys: node_id, data_dir, http_addr, http_advertise, raft_addr, raft_advertise, bootstrap, join, raft, leases, pprof, body_readers, signing, tls, tracing, log)`,
	}, lines(err))
}

func TestTypeErrors(t *testing.T) {
	body := "raft:\n  election_timeout: 20\n  snapshot_threshold: lots\nleases:\n  checkpoint_max_bytes: 2 potatoes\njoin: a:1\n"
	_, err := Parse(RoleServer, []byte(body), "s.yaml")
	require.ErrorIs(t, err, ErrSyntax)
	require.Equal(t, []string{
		`config: s.yaml:2: raft.election_timeout: must be a duration such as "20s" or "500ms" (got "20")`,
		`config: s.yaml:3: raft.snapshot_threshold: must be a whole number >= 0 (got "lots")`,
		`config: s.yaml:5: leases.checkpoint_max_bytes: must be a size such as "1MiB", "64KiB" or "4096" (got "2 potatoes")`,
		`config: s.yaml:6: join: must be a list (got a scalar)`,
	}, lines(err))
}

func TestSyntaxAndShapeErrors(t *testing.T) {
	_, err := Parse(RoleServer, []byte("raft: [\n"), "s.yaml")
	require.ErrorIs(t, err, ErrSyntax)
	require.Len(t, lines(err), 1)

	_, err = Parse(RoleServer, []byte("log: {level: info}\n---\nlog: {level: warn}\n"), "s.yaml")
	require.ErrorIs(t, err, ErrSyntax)
	require.Contains(t, err.Error(), "more than one YAML document")

	_, err = Parse(RoleServer, []byte("log: {level: info, level: warn}\n"), "s.yaml")
	require.ErrorIs(t, err, ErrSyntax)
	require.Contains(t, err.Error(), "log.level: appears more than once")

	_, err = Parse(RoleServer, []byte("- a\n"), "s.yaml")
	require.ErrorIs(t, err, ErrSyntax)
	require.Contains(t, err.Error(), "must be a mapping of keys (got a list)")
}

func TestEmptyFileAndNullKeepDefaults(t *testing.T) {
	stubHost(t, "n1")
	s, err := Parse(RoleServer, nil, "empty.yaml")
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:7400", s.(*Server).HTTPAddr)

	s, err = Parse(RoleServer, []byte("http_addr:\nbootstrap:\n"), "s.yaml")
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:7400", s.(*Server).HTTPAddr)
	require.True(t, s.(*Server).ShouldBootstrap())
}

func TestProfilesMergeWithDefaults(t *testing.T) {
	stubHost(t, "n1")
	cfg, err := Parse(RoleServer, []byte("leases:\n  profiles:\n    short: {ttl: 30s}\n    batch: {ttl: 2m, heartbeat: 30s}\n"), "s.yaml")
	require.NoError(t, err)
	p := cfg.(*Server).Leases.Profiles
	require.Equal(t, Profile{TTL: Duration(30 * time.Second), Heartbeat: Duration(7 * time.Second)}, p["short"])
	require.Equal(t, Profile{TTL: Duration(2 * time.Minute), Heartbeat: Duration(30 * time.Second)}, p["batch"])
	require.Contains(t, p, "workflow")
}

func TestEnvMapEntriesAndLists(t *testing.T) {
	stubHost(t, "n1")
	s, err := LoadServer(Source{Env: []string{
		"FENCEPOST_LEASES_PROFILES_BATCH_TTL=2m",
		"FENCEPOST_LEASES_PROFILES_BATCH_HEARTBEAT=30s",
		"FENCEPOST_LEASES_PROFILES={long-run: {ttl: 5m, heartbeat: 1m}}",
		"FENCEPOST_LEASES_PROFILES_LONG-RUN_TTL=6m",
		"FENCEPOST_JOIN=10.0.0.1:7400, 10.0.0.2:7400",
		"FENCEPOST_BOOTSTRAP=false",
	}})
	require.NoError(t, err)
	require.Equal(t, Profile{TTL: Duration(2 * time.Minute), Heartbeat: Duration(30 * time.Second)}, s.Leases.Profiles["batch"])
	require.Equal(t, Profile{TTL: Duration(6 * time.Minute), Heartbeat: Duration(time.Minute)}, s.Leases.Profiles["long-run"],
		"the entry variable applies after the whole-map variable")
	require.Equal(t, []string{"10.0.0.1:7400", "10.0.0.2:7400"}, s.Join)
	require.False(t, s.ShouldBootstrap())
}

func TestEnvUnknownVariables(t *testing.T) {
	stubHost(t, "n1")
	_, err := LoadServer(Source{Env: []string{
		"FENCEPOST_RAFT_ELECTON_TIMEOUT=1s",
		"FENCEPOST_CLUSTER=127.0.0.1:7400", // a sidecar key: skipped, not an error
		"FENCEPOST_PORTS_HTTP=7400",        // a dev key
		// ctl's variables, exported in the same shell (README): skipped.
		"FENCEPOST_CLUSTERS=east=127.0.0.1:7400", "FENCEPOST_CA_FILE=tls/ca.pem", "FENCEPOST_CERT_FILE=tls/sidecar-w1.pem", "FENCEPOST_KEY_FILE=tls/sidecar-w1-key.pem",
	}})
	require.ErrorIs(t, err, ErrUnknownKey)
	require.Equal(t, []string{
		`config: env FENCEPOST_RAFT_ELECTON_TIMEOUT: unknown variable: no server key maps to it (did you mean "FENCEPOST_RAFT_ELECTION_TIMEOUT"?)`,
	}, lines(err))

	_, err = LoadServer(Source{Env: []string{"FENCEPOST_RAFT_ELECTION_TIMEOUT=soon"}})
	require.Equal(t, []string{
		`config: env FENCEPOST_RAFT_ELECTION_TIMEOUT: raft.election_timeout: must be a duration such as "20s" or "500ms" (got "soon")`,
	}, lines(err))
}

func TestEnvInlineYAMLForRecords(t *testing.T) {
	stubHost(t, "n1")
	s, err := LoadSidecar(Source{Env: []string{
		"FENCEPOST_CLUSTER=127.0.0.1:7400",
		"FENCEPOST_WRITES_RULES=[{host: search.example.com, methods: [POST], write: false}]",
	}})
	require.NoError(t, err)
	require.Len(t, s.Writes.Rules, 1)
	require.Equal(t, "search.example.com", s.Writes.Rules[0].Host)
	require.False(t, *s.Writes.Rules[0].Write)

	_, err = LoadSidecar(Source{Env: []string{
		"FENCEPOST_CLUSTER=127.0.0.1:7400",
		"FENCEPOST_WRITES_RULES=[{host: a, wrte: false}]",
	}})
	require.ErrorIs(t, err, ErrUnknownKey)
	require.Contains(t, err.Error(), `config: env FENCEPOST_WRITES_RULES: writes.rules[0].wrte: unknown key (did you mean "write"?)`)
}

func TestFlags(t *testing.T) {
	stubHost(t, "n1")
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	f := BindFlags(fs, RoleServer)
	require.NoError(t, fs.Parse([]string{
		"--join=a:7400,b:7400", "--bootstrap=false",
		"--set", "leases.profiles.batch.ttl=2m", "--set", "leases.profiles.batch.heartbeat=20s",
		"--leases-max-ttl=1h", "--leases-max-ttl=2h",
	}))
	s, err := LoadServer(Source{Flags: f})
	require.NoError(t, err)
	require.Equal(t, []string{"a:7400", "b:7400"}, s.Join)
	require.False(t, s.ShouldBootstrap())
	require.Equal(t, Duration(2*time.Minute), s.Leases.Profiles["batch"].TTL)
	require.Equal(t, Duration(2*time.Hour), s.Leases.MaxTTL, "the last occurrence wins")

	fs = flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(nopWriter{})
	BindFlags(fs, RoleServer)
	err = fs.Parse([]string{"--set", "raft.nope=1"})
	require.ErrorContains(t, err, `unknown server key "raft.nope"`)

	fs = flag.NewFlagSet("server", flag.ContinueOnError)
	f = BindFlags(fs, RoleServer)
	require.NoError(t, fs.Parse([]string{"--bootstrap", "--raft-election-timeout=1"}))
	_, err = LoadServer(Source{Flags: f})
	require.Equal(t, []string{
		`config: flag --raft-election-timeout: raft.election_timeout: must be a duration such as "20s" or "500ms" (got "1")`,
	}, lines(err))

	fs = flag.NewFlagSet("server", flag.ContinueOnError)
	f = BindFlags(fs, RoleServer)
	require.NoError(t, fs.Parse([]string{"--bootstrap"}))
	s, err = LoadServer(Source{Flags: f})
	require.NoError(t, err)
	require.True(t, *s.Bootstrap, "a bare boolean flag means true")
}

func TestFlagsForWrongRole(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	f := BindFlags(fs, RoleFenced)
	_, err := LoadServer(Source{Flags: f})
	require.ErrorIs(t, err, ErrRole)
}

func TestFlagHelpShowsEnvAndDefault(t *testing.T) {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	var b strings.Builder
	fs.SetOutput(&b)
	BindFlags(fs, RoleServer)
	fs.PrintDefaults()
	out := b.String()
	require.Contains(t, out, "-raft-election-timeout duration")
	require.Contains(t, out, "(duration; env FENCEPOST_RAFT_ELECTION_TIMEOUT) (default 300ms)")
	require.Contains(t, out, "-join list")
	require.Contains(t, out, "-leases-checkpoint-max-bytes size")
	require.Contains(t, out, "-bootstrap")
	require.Contains(t, out, "-config file")
}

func TestLoadUnknownRole(t *testing.T) {
	_, err := Load(Role("nope"), Source{})
	require.ErrorIs(t, err, ErrRole)
	_, err = ParseRole("nope")
	require.ErrorIs(t, err, ErrRole)
	r, err := ParseRole("sidecar")
	require.NoError(t, err)
	require.Equal(t, RoleSidecar, r)
}

func TestKeysEnvNamesUnique(t *testing.T) {
	for _, r := range Roles() {
		seen := map[string]string{}
		for _, k := range Keys(r) {
			require.NotContains(t, seen, k.Env, "role %s: %s and %s share an env var", r, k.Name, seen[k.Env])
			seen[k.Env] = k.Name
			require.NotEmpty(t, k.Doc, "role %s key %s has no doc tag", r, k.Name)
		}
	}
}

func TestErrorsSplitsNil(t *testing.T) {
	require.Nil(t, Errors(nil))
	one := errors.New("x")
	require.Equal(t, []error{one}, Errors(one))
}

// nopWriter discards flag package output.
type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

func TestEmptyEnvIsUnset(t *testing.T) {
	stubHost(t, "n1")
	s, err := LoadServer(Source{Env: []string{"FENCEPOST_LOG_LEVEL=", "FENCEPOST_HTTP_ADDR=127.0.0.1:9000"}})
	require.NoError(t, err)
	require.Equal(t, "info", s.Log.Level)
	require.Equal(t, "127.0.0.1:9000", s.HTTPAddr)
}

func TestYAMLAnchorsAndMergeKeys(t *testing.T) {
	stubHost(t, "n1")
	body := `
leases:
  profiles:
    base: &base {ttl: 60s, heartbeat: 20s}
    slow:
      <<: *base
      ttl: 90s
    copy:
      <<: [*base]
`
	cfg, err := Parse(RoleServer, []byte(body), "s.yaml")
	require.NoError(t, err)
	p := cfg.(*Server).Leases.Profiles
	require.Equal(t, Profile{TTL: Duration(90 * time.Second), Heartbeat: Duration(20 * time.Second)}, p["slow"])
	require.Equal(t, p["base"], p["copy"])
}
