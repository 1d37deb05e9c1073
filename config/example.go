package config

// Example returns a commented YAML file for role that loads and validates as
// is; every value shown is the default unless a comment says otherwise. It
// returns "" for an unknown role.
func Example(role Role) string {
	switch role {
	case RoleServer:
		return exampleServer
	case RoleSidecar:
		return exampleSidecar
	case RoleFenced:
		return exampleFenced
	case RoleDev:
		return exampleDev
	}
	return ""
}

// header is shared by every example.
const header = `# Every key is optional unless marked required; the values shown are the
# defaults. Precedence: flags > environment > this file > defaults.
# Environment: FENCEPOST_<KEY> with dots as underscores, e.g.
#   FENCEPOST_LOG_LEVEL=debug, FENCEPOST_LEASES_PROFILES_SHORT_TTL=30s
# Flags: --<key> with dots and underscores as dashes, e.g. --log-level=debug,
#   or --set <key>=<value> for any key.
# Check a file with: fencepost config validate FILE
`

const exampleServer = `# fencepost server: one node of the lease cluster.
` + header + `
# Raft node id: unique in the cluster and stable across restarts.
# Empty: derived from the host name.
node_id: ""
# Raft log, stable store and snapshots. Empty: ./fencepost-data/<node_id>.
data_dir: ""
# Cluster HTTP API, used by sidecars, operators and joining nodes.
http_addr: 127.0.0.1:7400
# Address other members forward API requests to; never a wildcard.
# Empty: http_addr (which then must not be a wildcard).
http_advertise: ""
# Raft transport. To listen on every interface use 0.0.0.0:7401 and set
# raft_advertise.
raft_addr: 127.0.0.1:7401
# Address the other nodes dial; never a wildcard. Empty: raft_addr.
raft_advertise: ""
# Start a new cluster if the data directory is empty.
# Empty: true when join is empty, false otherwise.
bootstrap:
# HTTP endpoints of existing members to join through, e.g.
# [10.0.0.1:7400, 10.0.0.2:7400]. Joining is idempotent.
join: []
# Serve Go's profiler under /debug/pprof/ on http_addr
# (go tool pprof http://127.0.0.1:7400/debug/pprof/profile).
pprof: false
# Reader identities (certificate CommonName) that may also read task
# payloads and checkpoint data (?bodies=true). Operators always may.
body_readers: []

raft:
  heartbeat_timeout: 100ms     # must be <= election_timeout
  election_timeout: 300ms      # every profile ttl must be >= 1.5 x this
  leader_lease_timeout: 100ms  # must be <= heartbeat_timeout
  commit_timeout: 5ms
  snapshot_interval: 30s
  snapshot_threshold: 8192     # new log entries that trigger a snapshot
  trailing_logs: 10240         # entries kept after a snapshot for slow followers
  mixed_versions: false        # true only during a rolling upgrade from the previous release (deploy/RELEASES.md)

leases:
  default_profile: short       # used when a task is created without a profile
  # Rules for every profile: heartbeat <= ttl/3, min_ttl <= ttl <= max_ttl,
  # ttl >= 1.5 x raft.election_timeout, progress_timeout 0 or >= ttl. Profiles
  # listed here are added to the defaults (short, workflow) or change their
  # fields. progress_timeout: a lease that shows no progress (checkpoint or
  # POST /v1/progress) for this long is reclaimed, reason stalled (0: never).
  profiles:
    short:    {ttl: 21s, heartbeat: 7s, progress_timeout: 5m}
    workflow: {ttl: 45s, heartbeat: 15s, progress_timeout: 30m}
  grace: 5s                    # suspect_dead -> expired; a heartbeat within it revives the lease
  min_ttl: 1s
  max_ttl: 10m
  checkpoint_max_bytes: 1MiB   # sizes take B, KiB, MiB, GiB, KB, MB, GB or plain bytes
  max_task_id_bytes: 256
  # What one sidecar identity (client certificate) may hold; past it, 429
  # quota_exceeded. 0 is unlimited.
  quota:
    sessions: 64
    tasks: 10000                # tasks it created and nobody deleted yet
    bytes: 32MiB                # payload bytes of those tasks
    cluster_bytes: 128MiB       # payload bytes of all identities together
    requests_per_second: 1000   # API calls; past them 429 rate_limited. A sidecar
    request_burst: 2000         # certificate shared by a fleet needs more

signing:
  # Ed25519 private key file that signs fencing tokens ('fencepost tls
  # signing-key create'). Give the same file to every member (a Kubernetes
  # Secret); it never enters the raft log. Empty: tokens are not signed.
  key_file: ""

tls:
  # This member's identity ('fencepost tls ca create', 'fencepost tls cert
  # create --member --name <node_id>'): mutual TLS between members on the
  # raft port, TLS on the API. Empty: plaintext, allowed only while every
  # address above is on loopback (development), and logged at start.
  ca_file: ""
  cert_file: ""
  key_file: ""
  # Revocation list ('fencepost tls crl create'): certificates it lists are
  # refused on raft and the API. Re-read when it changes. Empty: none.
  crl_file: ""

tracing:
  # OpenTelemetry traces; each key mirrors a standard OTEL_* variable, which
  # also sets it (FENCEPOST_TRACING_* and flags win over OTEL_*).
  exporter: none               # none, otlp or console (OTEL_TRACES_EXPORTER)
  endpoint: ""                 # e.g. http://127.0.0.1:4318 (OTEL_EXPORTER_OTLP_ENDPOINT)
  protocol: http/protobuf      # or grpc (OTEL_EXPORTER_OTLP_PROTOCOL)
  service_name: ""             # default fencepost-ROLE (OTEL_SERVICE_NAME)
  resource_attributes: ""      # key=value,... (OTEL_RESOURCE_ATTRIBUTES)
  sampler: parentbased_always_on  # (OTEL_TRACES_SAMPLER)
  sampler_arg: ""              # ratio for the traceidratio samplers (OTEL_TRACES_SAMPLER_ARG)

log:
  level: info                  # debug, info, warn or error
  format: json                 # json or console
`

const exampleSidecar = `# fencepost sidecar: runs beside one worker, heartbeats for it and is its
# HTTP_PROXY, blocking every write once the lease is no longer current.
` + header + `
# Required: cluster HTTP endpoints (any member; followers forward).
cluster: [127.0.0.1:7400]
# Instead of cluster: several independent clusters sharing the task ids,
# each task in the one rendezvous hashing gives it (README "More than one
# cluster"), e.g. "east=10.0.1.1:7400,10.0.1.2:7400;west=10.0.2.1:7400".
# The same syntax and variable (FENCEPOST_CLUSTERS) as ctl's --clusters.
clusters: ""
cluster_tls:
  # The sidecar's identity toward the cluster ('fencepost tls cert create
  # --sidecar --name <worker_id>'): HTTPS to the members, verified against
  # ca_file. Empty: plain HTTP, allowed only for endpoints on loopback.
  ca_file: ""
  cert_file: ""
  key_file: ""
  crl_file: ""                 # revoked members are refused. Empty: none
# Worker id recorded in leases. Empty: derived from the host name.
worker_id: ""
# The worker's HTTP_PROXY. Loopback only.
proxy_addr: 127.0.0.1:7480
# Control API, health and metrics. Loopback only.
control_addr: 127.0.0.1:7481
# Optional: serve only /metrics, /healthz and /readyz on an address kubelet
# probes and Prometheus can reach (e.g. 0.0.0.0:7482). Empty: off.
metrics_addr: ""
# One-task mode: create or claim this task at start (empty: the worker
# acquires tasks through the control API).
task: ""
# One-task mode: profile for a newly created task. Empty: the cluster default.
profile: ""

heartbeat:
  # Local deadline = heartbeat send time + validFor - max(drift x validFor, margin_floor).
  drift: 0.01                  # assumed clock-rate difference, 0 to 0.1
  margin_floor: 200ms
# stream: heartbeats on one long-lived stream per member (a member without
# the stream route, an older version, is sent unary requests); unary: one
# HTTP request per heartbeat.
heartbeat_transport: stream

writes:
  reads_without_lease: allow   # allow or block reads while the lease is not current
  # Default: GET, HEAD, OPTIONS and TRACE are reads, every other method is a
  # write. Rules refine that; the first match wins; write is required. E.g.
  #   rules:
  #     - {host: search.example.com, path_prefix: /query, methods: [POST], write: false}
  #     - {host: "*.internal.example.com", write: true}
  rules: []
  # Writes journaled in the cluster (intent before, outcome after): a later
  # owner repeating the same Idempotency-Key gets the recorded response, and
  # an intent with no outcome is reported in doubt. E.g.
  #   journal:
  #     - {host: payments.example.com, path_prefix: /charges, methods: [POST]}
  journal: []
  # Built-in rules that make model inference (chat/completions, responses,
  # messages, embeddings) a read, so a worker whose lease lapsed can finish
  # a thought but not act: openai, anthropic, google, azure-openai,
  # mistral, local-openai. E.g. [openai, anthropic]
  presets: []

tls:
  # Hosts the worker calls as http:// while the sidecar speaks TLS upstream,
  # so writes stay visible and fenced. E.g.
  #   originate:
  #     - {host: api.example.com, server_name: api.example.com, ca_file: /etc/ssl/example-ca.pem}
  originate: []

connect:
  # host:port destinations a CONNECT tunnel may reach, only while the lease
  # is current. Fenced hosts do not belong here. E.g. [pypi.org:443]
  allow: []

# host:port targets whose requests carry the token's signature
# (X-Fencing-Signature). Empty: every target, so any API the worker calls
# could replay the signed token against a fenced service during the epoch.
# List your fenced services, e.g. [orders.internal:80]
signature_hosts: []
# host:port destinations never proxied to, beyond the cluster's API
# endpoints and the sidecar's own ports (both always refused, in every
# spelling). List the members' raft addresses, e.g. [10.0.0.5:7401]; a
# member host that is not this machine is refused on every port anyway.
refuse_targets: []

intercept:
  # Hosts whose HTTPS the sidecar intercepts with its own CA (created at
  # start, name-constrained to these hosts unless "*"), so every request in
  # a CONNECT tunnel is fenced. Workers trust the CA through bundle_file
  # (SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, NODE_EXTRA_CA_CERTS).
  # Leave out hosts whose clients pin certificates. E.g. [api.openai.com, "*.example.com"]
  hosts: []
  bundle_file: ""              # default: a file in the temp dir; k8s: a shared volume
  upstream_ca_file: ""         # default: the system roots
  ca_validity: 168h

# Transparent capture ("closing the bypass" in the README): fencepost capture
# installs nat rules that redirect the worker's outbound TCP to listen, so a
# client ignoring HTTP_PROXY is fenced too. The sidecar reads listen and
# other_tcp; fencepost capture reads the rest (and listen's port).
capture:
  listen: ""                   # e.g. 127.0.0.1:7483 ([::1]:7483 is added); empty: off
  other_tcp: block_without_lease # neither TLS nor HTTP: allow, block_without_lease or block
  ports: []                    # destination ports captured; empty: all TCP
  exclude_ports: []            # destination ports never captured, e.g. [22]
  exclude_cidrs: []            # never captured, e.g. [10.96.0.0/12]; cluster endpoints and loopback always
  block_udp_ports: ["443"]     # UDP refused to captured uids: QUIC falls back to (captured) TCP; [] leaves UDP alone
  sidecar_uid: 1337            # the sidecar's uid: its own connections are never captured
  worker_uid: 0                # >0: capture only this uid (a local worker; fencepost run --capture starts its child as it); 0: every uid but sidecar_uid
  backend: auto                # iptables backend: auto, nft or legacy

limits:
  max_request_body: 10MiB
  max_response_body: 64MiB
  max_header_bytes: 64KiB

timeouts:
  dial: 5s
  upstream: 60s
  idle: 90s
  upstream_idle: 4s            # below Node's 5 s keep-alive: the sidecar closes first

# Time in-flight requests get to finish on shutdown.
drain_timeout: 30s

tracing:
  # OpenTelemetry traces; each key mirrors a standard OTEL_* variable, which
  # also sets it (FENCEPOST_TRACING_* and flags win over OTEL_*).
  exporter: none               # none, otlp or console (OTEL_TRACES_EXPORTER)
  endpoint: ""                 # e.g. http://127.0.0.1:4318 (OTEL_EXPORTER_OTLP_ENDPOINT)
  protocol: http/protobuf      # or grpc (OTEL_EXPORTER_OTLP_PROTOCOL)
  service_name: ""             # default fencepost-ROLE (OTEL_SERVICE_NAME)
  resource_attributes: ""      # key=value,... (OTEL_RESOURCE_ATTRIBUTES)
  sampler: parentbased_always_on  # (OTEL_TRACES_SAMPLER)
  sampler_arg: ""              # ratio for the traceidratio samplers (OTEL_TRACES_SAMPLER_ARG)

# The worker's liveness, not only the sidecar's (README "When the worker
# dies or hangs"). A worker is tied to its leases by 'fencepost run -- CMD'
# (the child's exit gives them back at once, reason worker_exited), by an
# attach stream (GET /v1/attach; its close does the same), or by the probe
# below (failures give them back, reason worker_unhealthy).
worker:
  on_lost: terminate           # fencepost run: a lost lease SIGTERMs the child (none: leave it)
  kill_grace: 10s              # then SIGKILL after this
  restart: never               # or on-failure: a new child under a new grant (higher epoch)
  restart_backoff: 1s          # doubles per crash...
  restart_max: 30s             # ...up to this
  on_success: complete         # exit 0 completes the leases (give_back: gives them back)
  # Which proxied calls also count as progress toward the profile's
  # progress_timeout: none (only checkpoints and POST /v1/progress), writes
  # (every forwarded write) or all (every forwarded call). none keeps a
  # worker that loops on an API call a stalled run.
  progress_calls: none
  health:
    # For a worker the sidecar does not parent and that does not attach,
    # e.g. another container of the pod: GET a loopback URL (200-399 is
    # healthy) or run a command (exit 0). Empty: no probe.
    url: ""                    # e.g. http://127.0.0.1:8080/healthz
    command: []                # e.g. [/bin/worker-health, --quick]
    interval: 1s
    timeout: 500ms
    threshold: 2               # a dead worker is given up within interval x threshold + timeout
    start_period: 30s          # failures before the first success do not count for this long

log:
  level: info                  # debug, info, warn or error
  format: json                 # json or console
`

const exampleFenced = `# fencepost fenced: the reference downstream service that accepts a write
# only with a current fencing token.
` + header + `
addr: 127.0.0.1:7490
# Cluster endpoint to fetch token-signing public keys from, e.g.
# http://127.0.0.1:7400. Empty: signatures are not checked. With keys every
# token must be signed; an unknown key id fetches the keys again (at most
# every 5s).
keys_from: ""
# Cluster CA certificate: fetch the keys over HTTPS, verifying the cluster.
# Empty: plain HTTP, allowed only for a keys_from on loopback.
keys_ca_file: ""
# Reject tokens without a valid signature. The default with keys_from; needs it.
require_signature: false
# Accept unsigned tokens although keys_from is set. Unsafe: an unsigned
# epoch 2^64-1 locks a task's real owner out for good.
allow_unsigned: false
# The in-memory store keeps every task's floor and never forgets one: past
# max_tasks a new task is refused (503 store-full), and one holder (a signed
# token's worker id) may add at most max_tasks_per_holder of them, so one
# worker cannot take the table. 0: the defaults (100000 and 20000). For
# production, a SQL store (package fence/sqlstore) has no table cap.
max_tasks: 0
max_tasks_per_holder: 0
# Serve GET /v1/log (every accepted write) for demos and tests.
serve_log: false

tls:
  # Serve HTTPS ('fencepost tls cert create --service --name fenced --dns
  # <name>'); sidecars reach it with tls.originate or an intercepted https://
  # URL, verifying it against ca_file. Empty: plain HTTP, warned about at start
  # when addr is not loopback.
  ca_file: ""
  cert_file: ""
  key_file: ""
  crl_file: ""                 # revocation list. Empty: none

tracing:
  # OpenTelemetry traces; each key mirrors a standard OTEL_* variable, which
  # also sets it (FENCEPOST_TRACING_* and flags win over OTEL_*).
  exporter: none               # none, otlp or console (OTEL_TRACES_EXPORTER)
  endpoint: ""                 # e.g. http://127.0.0.1:4318 (OTEL_EXPORTER_OTLP_ENDPOINT)
  protocol: http/protobuf      # or grpc (OTEL_EXPORTER_OTLP_PROTOCOL)
  service_name: ""             # default fencepost-ROLE (OTEL_SERVICE_NAME)
  resource_attributes: ""      # key=value,... (OTEL_RESOURCE_ATTRIBUTES)
  sampler: parentbased_always_on  # (OTEL_TRACES_SAMPLER)
  sampler_arg: ""              # ratio for the traceidratio samplers (OTEL_TRACES_SAMPLER_ARG)

log:
  level: info                  # debug, info, warn or error
  format: json                 # json or console
`

const exampleDev = `# fencepost dev: a one-node cluster, a sidecar and the fenced service in one
# process, all on 127.0.0.1.
` + header + `
data_dir: ./fencepost-data/dev
# Task the embedded sidecar creates and holds, so a fenced call works at once.
task: dev-task
# host:port of your own services (behind your own fence validator) that get
# the token's signature too; the embedded fenced service always does.
signature_hosts: []

# Port 0 picks a free port.
ports:
  http: 7400                   # cluster HTTP API
  raft: 7401                   # raft transport
  proxy: 7480                  # sidecar HTTP proxy (the worker's HTTP_PROXY)
  control: 7481                # sidecar control API
  fenced: 7490                 # fenced service
  fenced_tls: 7491             # fenced service over HTTPS (intercepted by the sidecar)
  console: 7470                # operator console (web UI)

# Print every span as a JSON line on stdout (tracing.exporter=console).
trace_console: false
# The console links a timeline entry's trace id to this trace UI URL, e.g.
# http://127.0.0.1:16686/trace/{trace_id} (Jaeger); empty shows the id only.
console_trace_url: ""

tracing:
  # OpenTelemetry traces; each key mirrors a standard OTEL_* variable, which
  # also sets it (FENCEPOST_TRACING_* and flags win over OTEL_*).
  exporter: none               # none, otlp or console (OTEL_TRACES_EXPORTER)
  endpoint: ""                 # e.g. http://127.0.0.1:4318 (OTEL_EXPORTER_OTLP_ENDPOINT)
  protocol: http/protobuf      # or grpc (OTEL_EXPORTER_OTLP_PROTOCOL)
  service_name: ""             # default fencepost-ROLE (OTEL_SERVICE_NAME)
  resource_attributes: ""      # key=value,... (OTEL_RESOURCE_ATTRIBUTES)
  sampler: parentbased_always_on  # (OTEL_TRACES_SAMPLER)
  sampler_arg: ""              # ratio for the traceidratio samplers (OTEL_TRACES_SAMPLER_ARG)

log:
  level: info                  # debug, info, warn or error
  format: console              # json or console
`
