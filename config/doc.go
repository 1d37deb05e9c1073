// Package config defines the configuration of every fencepost role: the YAML
// schema, the defaults, the environment and flag overlay and the validation
// rules.
//
// Each role (server, sidecar, fenced, dev) reads one YAML file. Values are
// layered, later layers winning:
//
//	defaults < YAML file < FENCEPOST_* environment variables < command-line flags
//
// Every key has one dotted name (raft.election_timeout), one environment
// variable (FENCEPOST_RAFT_ELECTION_TIMEOUT) and one flag
// (--raft-election-timeout). Map entries are reachable the same way
// (leases.profiles.short.ttl, FENCEPOST_LEASES_PROFILES_SHORT_TTL,
// --set leases.profiles.short.ttl=30s).
//
// An empty environment variable counts as unset. Lists take a comma-separated
// value ("a:7400,b:7400") and records take inline YAML
// ('[{host: api.example.com, write: false}]').
//
// Loading is strict: an unknown key in the file, an unknown FENCEPOST_*
// variable and a value of the wrong type are errors, and validation reports
// every broken rule at once, one line each, naming the key and the rule.
// Checks that depend on the host (data directory writable, ports free) live in
// CheckRuntime so a file meant for another machine can still be validated.
//
// This package knows nothing about raftstore or proxy: the command wiring maps
// these structs into the packages' own Config types.
package config
