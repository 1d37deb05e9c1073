package config

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHeartbeatRuleMessage(t *testing.T) {
	stubHost(t, "n1")
	_, err := Parse(RoleServer, []byte("leases:\n  profiles:\n    short: {ttl: 20s, heartbeat: 7s}\n"), "s.yaml")
	require.ErrorIs(t, err, ErrInvalid)
	require.Equal(t, []string{
		"config: leases.profiles.short.heartbeat: must be <= ttl/3 (ttl 20s → max 6.666s, got 7s)",
	}, lines(err))
}

func TestServerRulesAllReported(t *testing.T) {
	stubHost(t, "n1")
	body := `
node_id: "bad id"
http_addr: 127.0.0.1:7401
raft_addr: 0.0.0.0:7401
bootstrap: true
join: [10.0.0.1:7400, "http://x/path", "0.0.0.0:7400"]
raft:
  heartbeat_timeout: 400ms
  election_timeout: 300ms
  leader_lease_timeout: 500ms
  snapshot_threshold: 0
leases:
  default_profile: nope
  min_ttl: 2s
  max_ttl: 1m
  checkpoint_max_bytes: 0
  max_task_id_bytes: 0
  profiles:
    tiny: {ttl: 400ms, heartbeat: 100ms}
    floor: {ttl: 1500ms, heartbeat: 0s}
    huge: {ttl: 2m, heartbeat: 10s}
    Bad: {ttl: 30s, heartbeat: 10s}
log: {level: loud, format: xml}
`
	_, err := Parse(RoleServer, []byte(body), "s.yaml")
	require.ErrorIs(t, err, ErrInvalid)
	require.Equal(t, []string{
		`config: node_id: may only contain letters, digits, '-', '_' and '.' (got "bad id")`,
		`config: raft_addr: must differ from http_addr (both use port 7401)`,
		`config: raft_advertise: must be a host and non-zero port other nodes can dial (got "0.0.0.0:7401"); set it when raft_addr is a wildcard or port 0`,
		`config: join[1]: must not carry a path, query or user info (got "http://x/path")`,
		`config: join[2]: must name a reachable host and a non-zero port (got "0.0.0.0:7400")`,
		`config: bootstrap: must be false when join is set: a node either starts a new cluster or joins one`,
		`config: tls.cert_file: must be set when raft_addr is not loopback (got "0.0.0.0:7401"): plaintext is for loopback development only`,
		`config: tls.cert_file: must be set when raft_advertise is not loopback (got "0.0.0.0:7401"): plaintext is for loopback development only`,
		`config: raft.heartbeat_timeout: must be <= raft.election_timeout (300ms, got 400ms)`,
		`config: raft.leader_lease_timeout: must be <= raft.heartbeat_timeout (400ms, got 500ms)`,
		`config: raft.snapshot_threshold: must be > 0`,
		`config: leases.checkpoint_max_bytes: must be between 1 and 64MiB (got 0)`,
		`config: leases.max_task_id_bytes: must be between 1 and 4096 (got 0)`,
		`config: leases.default_profile: must name a profile in leases.profiles ("Bad", "floor", "huge", "short", "tiny", "workflow"), got "nope"`,
		`config: leases.profiles.Bad: profile names may only contain a-z, 0-9, '_' and '-' and must start with a letter or digit`,
		`config: leases.profiles.floor.ttl: must be >= leases.min_ttl (2s, got 1.5s)`,
		`config: leases.profiles.floor.heartbeat: must be > 0 (got 0s)`,
		`config: leases.profiles.huge.ttl: must be <= leases.max_ttl (1m, got 2m)`,
		`config: leases.profiles.tiny.ttl: must be >= 1.5 × raft.election_timeout (election_timeout 300ms → min 450ms, got 400ms)`,
		`config: log.level: must be one of debug, info, warn, error (got "loud")`,
		`config: log.format: must be json or console (got "xml")`,
	}, lines(err))
}

func TestSidecarRules(t *testing.T) {
	stubHost(t, "n1")
	_, err := Parse(RoleSidecar, nil, "sc.yaml")
	require.Equal(t, []string{`config: cluster: must list at least one cluster endpoint (host:port), or set clusters`}, lines(err))

	body := `
cluster: [127.0.0.1:7400, "https://c.example.com"]
proxy_addr: 0.0.0.0:7480
control_addr: 10.1.2.3:7481
profile: short
heartbeat: {drift: 0.5, margin_floor: -1s}
writes:
  reads_without_lease: maybe
  rules:
    - {host: "api.*.com", path_prefix: v1, methods: [post], write: true}
    - {host: "http://x.example.com/"}
tls:
  originate:
    - {host: a.example.com}
    - {host: a.example.com}
connect:
  allow: [pypi.org:443, pypi.org]
limits: {max_header_bytes: 0}
timeouts: {dial: 0s}
drain_timeout: -1s
`
	_, err = Parse(RoleSidecar, []byte(body), "sc.yaml")
	require.ErrorIs(t, err, ErrInvalid)
	require.Equal(t, []string{
		`config: cluster_tls.ca_file: must be set for an https:// endpoint (cluster[1] "https://c.example.com"): the sidecar verifies the cluster against it`,
		`config: proxy_addr: must listen on loopback (127.0.0.1, ::1 or localhost) so only the local worker can use it (got "0.0.0.0:7480")`,
		`config: control_addr: must listen on loopback (127.0.0.1, ::1 or localhost) so only the local worker can use it (got "10.1.2.3:7481")`,
		`config: profile: is only used in one-task mode; set task too`,
		`config: heartbeat.drift: must be between 0 and 0.1 (got 0.5)`,
		`config: heartbeat.margin_floor: must be >= 0 (got -1s)`,
		`config: writes.reads_without_lease: must be allow or block (got "maybe")`,
		`config: writes.rules[0].host: may only use a wildcard as a leading "*." (got "api.*.com")`,
		`config: writes.rules[0].path_prefix: must start with / (got "v1")`,
		`config: writes.rules[0].methods[0]: must be an upper-case HTTP method such as POST (got "post")`,
		`config: writes.rules[1].host: must be a host name such as api.example.com, not a URL (got "http://x.example.com/")`,
		`config: writes.rules[1].write: must be set to true or false`,
		`config: tls.originate[1].host: "a.example.com" is listed twice`,
		`config: connect.allow[1]: must be host:port (got "pypi.org")`,
		`config: limits.max_header_bytes: must be > 0 (got 0)`,
		`config: timeouts.dial: must be > 0 (got 0s)`,
		`config: drain_timeout: must be >= 0 (got -1s)`,
	}, lines(err))
}

func TestSidecarClusters(t *testing.T) {
	stubHost(t, "w1")
	cfg, err := Parse(RoleSidecar, []byte("clusters: 'east=127.0.0.1:7400,127.0.0.1:7410; west=127.0.0.1:7500'\n"), "sc.yaml")
	require.NoError(t, err)
	shards, err := cfg.(*Sidecar).Shards()
	require.NoError(t, err)
	require.Len(t, shards, 2)
	require.Equal(t, []string{"127.0.0.1:7400", "127.0.0.1:7410", "127.0.0.1:7500"}, cfg.(*Sidecar).Endpoints())
	for body, want := range map[string]string{
		"clusters: 'east=127.0.0.1:7400'\ncluster: [127.0.0.1:7400]\n": `config: clusters: set either cluster (one cluster) or clusters (several), not both`,
		"clusters: 'east=127.0.0.1:7400;east=127.0.0.1:7500'\n":        `config: clusters: shard name "east" given twice`,
		"clusters: 'east'\n":               `config: clusters: "east" is not NAME=ADDR[,ADDR...]`,
		"clusters: 'east=10.0.0.1:7400'\n": `config: cluster_tls.cert_file: must be set when clusters.east[0] is not loopback (got "10.0.0.1:7400"): plaintext is for loopback development only`,
	} {
		_, err := Parse(RoleSidecar, []byte(body), "sc.yaml")
		require.ErrorIs(t, err, ErrInvalid, body)
		require.Contains(t, lines(err), want, body)
	}
}

func TestSidecarOneTaskMode(t *testing.T) {
	stubHost(t, "w1")
	cfg, err := Parse(RoleSidecar, []byte("cluster: [127.0.0.1:7400]\ntask: order-42\nprofile: workflow\nproxy_addr: localhost:0\ncontrol_addr: '[::1]:0'\n"), "sc.yaml")
	require.NoError(t, err)
	s := cfg.(*Sidecar)
	require.Equal(t, "w1", s.WorkerID)
	require.Equal(t, "order-42", s.Task)

	_, err = Parse(RoleSidecar, []byte("cluster: [127.0.0.1:7400]\ntask: \"a b\"\n"), "sc.yaml")
	require.Equal(t, []string{`config: task: must not contain spaces or control characters (got "a b")`}, lines(err))
}

func TestFencedRules(t *testing.T) {
	_, err := Parse(RoleFenced, []byte("addr: nope\nrequire_signature: true\n"), "f.yaml")
	require.Equal(t, []string{
		`config: addr: must be host:port (got "nope")`,
		`config: require_signature: needs keys_from: signatures are checked against the cluster's public keys`,
	}, lines(err))
	_, err = Parse(RoleFenced, []byte("keys_from: http://127.0.0.1:7400\nrequire_signature: true\n"), "f.yaml")
	require.NoError(t, err)
}

func TestDevRulesAndDerivedConfigs(t *testing.T) {
	_, err := Parse(RoleDev, []byte("ports: {http: 7400, raft: 7400, proxy: 70000, control: 0, fenced: 0}\n"), "d.yaml")
	require.Equal(t, []string{
		`config: ports.raft: must differ from ports.http (both 7400)`,
		`config: ports.proxy: must be from 0 to 65535 (got 70000)`,
	}, lines(err))
	_, err = Parse(RoleDev, []byte("console_trace_url: http://127.0.0.1:16686/trace\n"), "d.yaml")
	require.Equal(t, []string{`config: console_trace_url: must contain {trace_id}`}, lines(err))
	_, err = Parse(RoleDev, []byte("console_trace_url: http://127.0.0.1:16686/trace/{trace_id}\n"), "d.yaml")
	require.NoError(t, err)

	cfg, err := Parse(RoleDev, nil, "d.yaml")
	require.NoError(t, err)
	d := cfg.(*Dev)
	require.Equal(t, "console", d.Log.Format)
	require.NoError(t, d.Server().Validate())
	require.True(t, d.Server().ShouldBootstrap())
	require.NoError(t, d.Sidecar().Validate())
	require.NoError(t, d.Fenced().Validate())
	require.Equal(t, "127.0.0.1:7480", d.Sidecar().ProxyAddr)
}

func TestCheckRuntime(t *testing.T) {
	stubHost(t, "n1")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()

	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))

	s := DefaultServer()
	s.HTTPAddr = l.Addr().String()
	s.RaftAddr = "127.0.0.1:0"
	s.RaftAdvertise = "127.0.0.2:7401"
	s.DataDir = filepath.Join(file, "sub")
	s.Signing.KeyFile = filepath.Join(dir, "missing.key")
	s.fill()
	require.NoError(t, s.Validate())
	err = s.CheckRuntime()
	require.ErrorIs(t, err, ErrRuntime)
	require.Equal(t, []string{
		"config: data_dir: cannot use " + s.DataDir + ": not a directory",
		"config: http_addr: cannot listen on " + l.Addr().String() + ": address already in use (move it with --http-addr)",
		"config: signing.key_file: cannot read " + s.Signing.KeyFile + ": no such file or directory",
	}, lines(err))

	s.DataDir = filepath.Join(dir, "new", "deeper")
	s.HTTPAddr = "127.0.0.1:0"
	s.Signing.KeyFile = file
	require.NoError(t, s.CheckRuntime())
	_, err = os.Stat(filepath.Join(dir, "new"))
	require.ErrorIs(t, err, os.ErrNotExist, "the check leaves nothing behind")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)

	d := DefaultDev()
	d.DataDir = dir
	d.Ports = DevPorts{HTTP: l.Addr().(*net.TCPAddr).Port}
	require.Equal(t, []string{"config: ports.http: cannot listen on " + l.Addr().String() + ": address already in use (move it with --ports-http)"},
		lines(d.CheckRuntime()), "the error names the flag that moves the port")

	sc := DefaultSidecar()
	sc.ProxyAddr, sc.ControlAddr = "127.0.0.1:0", "127.0.0.1:0"
	sc.TLS.Originate = []TLSOrigination{{Host: "a", CAFile: filepath.Join(dir, "ca.pem")}}
	require.ErrorIs(t, sc.CheckRuntime(), ErrRuntime)

	f := DefaultFenced()
	f.Addr = l.Addr().String()
	require.ErrorIs(t, f.CheckRuntime(), ErrRuntime)
}

// TestRequestRateRules: the per-identity request rate is unlimited only
// as a pair, and never negative.
func TestRequestRateRules(t *testing.T) {
	stubHost(t, "n1")
	for body, want := range map[string]string{
		"leases:\n  quota: {requests_per_second: 0}\n": `config: leases.quota: requests_per_second and request_burst are unlimited together (both 0) or neither (got 0 and 2000)`,
		"leases:\n  quota: {request_burst: -1}\n":      `config: leases.quota: requests_per_second and request_burst must be >= 0 (0: unlimited)`,
	} {
		_, err := Parse(RoleServer, []byte(body), "s.yaml")
		require.ErrorIs(t, err, ErrInvalid, body)
		require.Contains(t, lines(err), want, body)
	}
	cfg, err := Parse(RoleServer, []byte("leases:\n  quota: {requests_per_second: 0, request_burst: 0}\n"), "s.yaml")
	require.NoError(t, err)
	require.Zero(t, cfg.(*Server).Leases.Quota.RequestsPerSecond)
}
