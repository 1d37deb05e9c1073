package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/fencepost/fencepost/fence/pki"
)

const healthcheckUsage = `Usage: fencepost healthcheck [--timeout 3s] [--ca FILE] URL

GETs URL and exits 0 when the answer is 2xx, 1 otherwise (with one line
saying what came back), 2 for a bad URL. Proxy variables are ignored: a
probe checks the process it names, never a proxy in between.

It is the health check for images that have no shell or curl (the fencepost
image is distroless): compose and other runtimes run it inside the
container, against the role's own /healthz or /readyz on loopback.

Examples:
  fencepost healthcheck --ca /tls/ca.pem https://127.0.0.1:7400/readyz   # a cluster node: leader known, caught up
  fencepost healthcheck http://127.0.0.1:7481/readyz      # a sidecar: session open, task held
  fencepost healthcheck http://127.0.0.1:7490/healthz     # fenced
`

func init() {
	register(&command{name: "healthcheck", summary: "health check: GET a URL, exit 0 on 2xx (for images without curl)", usage: healthcheckUsage, run: runHealthcheck})
}

func runHealthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("healthcheck")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this `duration`")
	caFile := fs.String("ca", "", "verify an https:// URL against this CA `file` (the cluster CA)")
	if code, ok := parseFlags(fs, healthcheckUsage, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(stderr, "healthcheck", "needs exactly one URL")
	}
	u, err := url.Parse(fs.Arg(0))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError(stderr, "healthcheck", fmt.Sprintf("URL must be http(s)://host:port/path (got %q)", fs.Arg(0)))
	}
	if *timeout <= 0 {
		return usageError(stderr, "healthcheck", "--timeout must be > 0")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return usageError(stderr, "healthcheck", err.Error())
	}
	tr := &http.Transport{Proxy: nil}
	if *caFile != "" {
		pool, err := pki.LoadPool(*caFile)
		if err != nil {
			return usageError(stderr, "healthcheck", "--ca: "+err.Error())
		}
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	}
	client := &http.Client{Transport: tr}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "fencepost healthcheck: %s: %v\n", u, err)
		return exitRuntime
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		fmt.Fprintf(stderr, "fencepost healthcheck: %s: %s\n", u, resp.Status)
		return exitRuntime
	}
	fmt.Fprintf(stdout, "%s: %s\n", u, resp.Status)
	return exitOK
}
