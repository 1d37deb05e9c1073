// Package deploy keeps deploy/ honest. Its tests parse every YAML file and
// the Grafana dashboard, check that the Kubernetes manifests and the compose
// file only use configuration keys, environment variables and flags the
// binary knows (and that each container's effective configuration
// validates), check the Dockerfile against the module, and check that every
// metric the Prometheus rules and the dashboard name is one the binary
// exports, by scraping a running `fencepost dev`.
//
// The package holds no code besides its tests.
package deploy
