package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/fencepost/fencepost/cmd/fencepost/console"
	"github.com/fencepost/fencepost/config"
	"github.com/fencepost/fencepost/fence/pki"
	"github.com/fencepost/fencepost/proxy/cluster"
)

const consoleUsage = `Usage: fencepost console [--listen ADDR] [--cluster HOST:PORT,... | --clusters NAME=ADDR,...;NAME=...] --ca CA --cert CERT --key KEY [flags]

Serves the operator console, a web UI of the cluster: Tasks, one task's
timeline, Workers, Cluster and the Health of the lease mechanism, updated
live, with revoke, cancel and signal. It talks to the cluster's API with
the certificate given (an operator's, or a reader's: then the actions are
disabled and refused), exactly as 'fencepost ctl' does; the browser never
needs a certificate. It listens on loopback unless told otherwise; an
address beyond loopback needs --token-file (or $FENCEPOST_CONSOLE_TOKEN)
and --tls-cert/--tls-key.

With --clusters (several clusters sharing the task ids, ctl's syntax) the
lists merge every cluster, a task's page and actions go to the cluster
that holds it, and the Cluster page lists every cluster's members as
cluster/member, a cluster that does not answer as one unreachable row.

Examples:
  fencepost console --ca tls/ca.pem --cert tls/operator-alice.pem --key tls/operator-alice-key.pem
  fencepost console --listen 10.0.0.5:7470 --token-file /etc/fencepost/console-token \
      --tls-cert console.pem --tls-key console-key.pem --ca ... --cert ... --key ...
`

// consoleTokenEnv names the variable read for the login token.
const consoleTokenEnv = "FENCEPOST_CONSOLE_TOKEN"

// consoleTraceURLEnv sets --trace-url's default.
const consoleTraceURLEnv = "FENCEPOST_CONSOLE_TRACE_URL"

func init() {
	register(&command{name: "console", summary: "serve the operator console (web UI) on loopback", usage: consoleUsage, run: runConsole})
}

// consoleFlags are the console's flags beyond ctl's --cluster/--ca/--cert/--key.
type consoleFlags struct {
	listen, tokenFile, tlsCert, tlsKey, hosts, metrics, fencedLog, traceURL string
}

func runConsole(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := &ctlGlobals{cluster: ctlDefaultCluster}
	if env := os.Getenv(ctlClusterEnv); env != "" {
		g.cluster = env
	}
	g.clusters = os.Getenv(ctlClustersEnv)
	g.ca, g.cert, g.key = os.Getenv(ctlCAEnv), os.Getenv(ctlCertEnv), os.Getenv(ctlKeyEnv)
	var f consoleFlags
	fs := newFlagSet("console")
	fs.StringVar(&g.cluster, "cluster", g.cluster, "cluster members' HTTP addresses, comma-separated (env "+ctlClusterEnv+")")
	fs.StringVar(&g.clusters, "clusters", g.clusters, "several clusters sharing the task ids, NAME=ADDR,ADDR;NAME=...: lists merge them, actions go to the task's (env "+ctlClustersEnv+"; instead of --cluster)")
	fs.StringVar(&g.ca, "ca", g.ca, "cluster CA certificate (env "+ctlCAEnv+")")
	fs.StringVar(&g.cert, "cert", g.cert, "the console's certificate: an operator's or a reader's (env "+ctlCertEnv+")")
	fs.StringVar(&g.key, "key", g.key, "that certificate's key (env "+ctlKeyEnv+")")
	fs.StringVar(&f.listen, "listen", console.DefaultListen, "address to serve the console on")
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding the login token (env "+consoleTokenEnv+" holds it directly); required beyond loopback")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "certificate to serve the console over HTTPS; required beyond loopback")
	fs.StringVar(&f.tlsKey, "tls-key", "", "key of --tls-cert")
	fs.StringVar(&f.hosts, "host", "", "extra host names browsers use to reach the console, comma-separated (the Host header is checked)")
	fs.StringVar(&f.metrics, "metrics", "", "extra /metrics URLs for the Health page (sidecars, fenced), comma-separated")
	fs.StringVar(&f.fencedLog, "fenced-log", "", "a fenced reference service's /v1/log URL: the writes it accepted and refused join each task's timeline")
	fs.StringVar(&f.traceURL, "trace-url", os.Getenv(consoleTraceURLEnv), "trace UI URL with {trace_id} (e.g. http://127.0.0.1:16686/trace/{trace_id}): timeline trace ids link there (env "+consoleTraceURLEnv+")")
	if code, ok := parseFlags(fs, consoleUsage, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, "console", fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
	// The console logs its audit lines as JSON, like every role's default.
	log, err := newLogger(config.Log{Level: "info", Format: "json"}, stderr)
	if err != nil {
		return reportError(stderr, "console", err)
	}
	defer func() { _ = log.Sync() }()
	cfg, msg := consoleConfig(g, f, os.Getenv(consoleTokenEnv), log)
	if msg != "" {
		return usageError(stderr, "console", msg)
	}
	srv, err := console.Start(cfg)
	if err != nil {
		return usageError(stderr, "console", consoleErrorLine(err))
	}
	fmt.Fprintf(stdout, "fencepost console: %s (as %s)\n", srv.URL(), cfg.Identity)
	<-ctx.Done()
	if err := srv.Close(); err != nil {
		return reportError(stderr, "console", err)
	}
	return exitOK
}

// consoleErrorLine names the flag behind a refused configuration.
func consoleErrorLine(err error) string {
	switch {
	case errors.Is(err, console.ErrExposedWithoutToken):
		return "--listen: an address beyond loopback needs --token-file (or $" + consoleTokenEnv + ")"
	case errors.Is(err, console.ErrExposedWithoutTLS):
		return "--listen: an address beyond loopback needs --tls-cert and --tls-key"
	case errors.Is(err, console.ErrBadTraceURL):
		return "--trace-url: " + strings.TrimPrefix(err.Error(), console.ErrBadTraceURL.Error()+": ")
	case errors.Is(err, console.ErrBadListen):
		return "--listen: " + strings.TrimPrefix(err.Error(), "console: ")
	}
	return strings.TrimPrefix(err.Error(), "console: ")
}

// consoleCluster is how the console reaches the cluster: the client, the
// identity the certificate names, and what the Cluster and Health pages
// read beside the API.
type consoleCluster struct {
	client    console.Cluster // a *cluster.Client, or consoleShards with --clusters
	identity  pki.Identity
	clientTLS *tls.Config
	certs     map[string]*x509.Certificate
	metrics   []string
}

// dialConsoleCluster builds the client from ctl's flags; msg names the
// flag at fault.
func dialConsoleCluster(g *ctlGlobals) (consoleCluster, string) {
	var out consoleCluster
	endpoints := splitEndpoints(g.cluster)
	if len(endpoints) == 0 && g.clusters == "" {
		return out, "--cluster: no endpoint given"
	}
	tc, err := g.tlsConfig()
	if err != nil {
		return out, err.Error()
	}
	out.identity = pki.Identity{Name: "dev", Role: "dev"} // a plain loopback cluster's caller
	out.certs = map[string]*x509.Certificate{}
	if tc != nil {
		src, _ := pki.NewSource(pki.Files{CA: g.ca, Cert: g.cert, Key: g.key}) // loaded by tlsConfig above
		m := src.Current()
		out.identity, out.clientTLS = m.Identity, tc
		out.certs["console credential ("+m.Identity.String()+")"] = m.Leaf
		if ca := firstCert(g.ca); ca != nil {
			out.certs["cluster CA"] = ca
		}
	}
	newClient := func(eps []string) (*cluster.Client, error) {
		return cluster.New(cluster.Config{TLS: tc, Endpoints: eps, Retries: 2 * len(eps)})
	}
	if g.clusters != "" {
		shards, err := shardsFor(g.clusters, newClient)
		if err != nil {
			return out, err.Error()
		}
		out.client, endpoints = newConsoleShards(shards), nil
		for _, sh := range shards.All() {
			endpoints = append(endpoints, sh.Client.Endpoints()...)
		}
	} else {
		c, err := newClient(endpoints)
		if err != nil {
			return out, "--cluster: " + strings.TrimPrefix(err.Error(), "cluster: invalid config: ")
		}
		out.client = c
	}
	scheme := "http://"
	if tc != nil {
		scheme = "https://"
	}
	for _, ep := range endpoints {
		if !strings.Contains(ep, "://") {
			ep = scheme + ep
		}
		out.metrics = append(out.metrics, strings.TrimSuffix(ep, "/")+"/metrics")
	}
	return out, ""
}

// consoleConfig turns the flags into the console's configuration.
func consoleConfig(g *ctlGlobals, f consoleFlags, envToken string, log *zap.Logger) (console.Config, string) {
	cc, msg := dialConsoleCluster(g)
	if msg != "" {
		return console.Config{}, msg
	}
	cfg := console.Config{Listen: f.listen, Cluster: cc.client, Identity: cc.identity, Token: envToken,
		Hosts: splitEndpoints(f.hosts), MetricsURLs: append(cc.metrics, splitEndpoints(f.metrics)...),
		Certs: cc.certs, MemberTLS: cc.clientTLS, FencedLogURL: f.fencedLog, TraceURL: f.traceURL, Logger: log.Named("console")}
	if cc.clientTLS != nil {
		cfg.MetricsClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cc.clientTLS}}
	}
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return cfg, "--token-file: " + err.Error()
		}
		if cfg.Token = strings.TrimSpace(string(b)); cfg.Token == "" {
			return cfg, "--token-file: the file is empty"
		}
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return cfg, "--tls-cert and --tls-key go together"
	}
	if f.tlsCert != "" {
		pair, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return cfg, "--tls-cert: " + err.Error()
		}
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
		if leaf, err := x509.ParseCertificate(pair.Certificate[0]); err == nil {
			cfg.Certs["console HTTPS"] = leaf
		}
	}
	if host, _, err := net.SplitHostPort(f.listen); err == nil && !console.IsLoopback(host) && cfg.Token != "" && len(cfg.Token) < 16 {
		return cfg, "--token-file: a login token must be at least 16 characters"
	}
	return cfg, ""
}

// firstCert parses the first certificate of a PEM file, nil if none.
func firstCert(path string) *x509.Certificate {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil
	}
	return c
}

// startDevConsole starts the console of `fencepost dev` on addr, as dev's
// operator, reading the health counters of the cluster, the sidecar and
// the fenced service, and the fenced service's log for the timelines.
func startDevConsole(addr, clusterAddr string, op config.CertFiles, metrics []string, fencedLog, traceURL string, log *zap.Logger) (*console.Server, error) {
	g := &ctlGlobals{cluster: clusterAddr, ca: op.CAFile, cert: op.CertFile, key: op.KeyFile}
	cfg, msg := consoleConfig(g, consoleFlags{listen: addr, metrics: strings.Join(metrics, ","), fencedLog: fencedLog, traceURL: traceURL}, "", log)
	if msg != "" {
		return nil, fmt.Errorf("%w: console: %s", config.ErrRuntime, msg)
	}
	srv, err := console.Start(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: ports.console: %w", config.ErrRuntime, err)
	}
	return srv, nil
}
