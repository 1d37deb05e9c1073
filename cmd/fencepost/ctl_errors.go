package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/fencepost/fencepost/proxy/cluster"
)

// errCtlUsage marks an argument an action found invalid after parsing.
var errCtlUsage = errors.New("usage")

// usagef returns an error that reportCtlError turns into exit 2.
func usagef(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errCtlUsage, fmt.Sprintf(format, a...))
}

// errCtlConflict marks a condition ctl itself found (a lease lost in a
// heartbeat reply) that deserves exit 4.
var errCtlConflict = errors.New("conflict")

// reportCtlError writes err as one line and returns its exit code.
func reportCtlError(stderr io.Writer, name string, g *ctlGlobals, rid string, err error) int {
	if errors.Is(err, errCtlUsage) {
		return usageError(stderr, name, strings.TrimPrefix(err.Error(), errCtlUsage.Error()+": "))
	}
	if errors.Is(err, cluster.ErrUnavailable) || errors.Is(err, cluster.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		// No answer at all is what a TLS/plain mismatch looks like from
		// here; say so, and what to pass, instead of "unreachable".
		if hint := ctlSchemeHint(g); hint != "" {
			fmt.Fprintf(stderr, "fencepost ctl: %s\n", hint)
			return exitUsage
		}
	}
	code, msg := ctlErrorLine(err, g.cluster, g.timeout, rid)
	fmt.Fprintf(stderr, "fencepost ctl: %s\n", msg)
	return code
}

// ctlSchemeProbe bounds the probe for a TLS/plain mismatch after a failure.
const ctlSchemeProbe = 2 * time.Second

// ctlSchemeHint probes the members for a TLS/plain mismatch and returns
// the line that says what to pass, or "" when there is none.
func ctlSchemeHint(g *ctlGlobals) string {
	tc, err := g.tlsConfig()
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), ctlSchemeProbe)
	defer cancel()
	var me *cluster.MismatchError
	if !errors.As(cluster.ProbeScheme(ctx, splitEndpoints(g.cluster), tc), &me) {
		return ""
	}
	envs := ctlCAEnv + ", " + ctlCertEnv + ", " + ctlKeyEnv
	if me.ServerTLS {
		return "cluster member " + me.Endpoint + " speaks TLS and ctl plain HTTP: pass --ca, --cert and --key (or " + envs +
			"): the cluster CA and your certificate (fencepost dev prints them in its ctl line)"
	}
	return "cluster member " + me.Endpoint + " speaks plain HTTP and ctl TLS: drop --ca, --cert and --key (and " + envs +
		"), or point --cluster at the TLS cluster"
}

// ctlErrorLine maps err to an exit code and a one-line message.
func ctlErrorLine(err error, endpoints string, timeout time.Duration, rid string) (int, string) {
	var ce *cluster.Error
	switch {
	case errors.Is(err, errCtlConflict):
		return exitConflict, strings.TrimPrefix(err.Error(), errCtlConflict.Error()+": ")
	case errors.As(err, &ce):
		return problemExit(ce), problemLine(ce)
	case errors.Is(err, cluster.ErrTimeout):
		return exitRuntime, fmt.Sprintf("no answer from the cluster at %s within %s; the outcome is unknown: repeat with --request-id %s to apply it at most once (%s)",
			endpoints, timeout, rid, lastCause(err))
	case errors.Is(err, cluster.ErrUnavailable):
		return exitRuntime, fmt.Sprintf("cluster unreachable at %s (%s)", endpoints, lastCause(err))
	case errors.Is(err, context.DeadlineExceeded):
		return exitRuntime, fmt.Sprintf("no answer from the cluster at %s within %s", endpoints, timeout)
	case errors.Is(err, context.Canceled):
		return exitRuntime, "interrupted"
	}
	return exitRuntime, err.Error()
}

// problemExit maps a problem the cluster answered to an exit code.
func problemExit(ce *cluster.Error) int {
	switch ce.Status {
	case http.StatusNotFound:
		return exitNotFound
	case http.StatusConflict:
		return exitConflict
	case http.StatusForbidden, http.StatusUnauthorized:
		return exitForbidden
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return exitUsage
	}
	return exitRuntime
}

// problemLine renders a problem as "<code>: <detail>", adding the task's
// current epoch when the cluster sent it (a stale holder learns how far
// behind it is).
func problemLine(ce *cluster.Error) string {
	p := ce.Problem
	msg := p.Code
	if p.Code == "unavailable" {
		msg = "cluster unavailable at " + ce.Endpoint
	}
	if p.Detail != "" {
		// The store's package prefix says nothing to an operator.
		msg += ": " + oneLine(strings.TrimPrefix(p.Detail, "raftstore: "))
	}
	if p.Epoch != 0 {
		msg += fmt.Sprintf(" (current epoch %d)", p.Epoch)
	}
	return msg
}

// lastCause returns the innermost reason of a transport error, such as
// "connection refused". The client formats the network error into its
// message rather than wrapping it, so the tail of the text is the most
// precise thing available.
func lastCause(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return oneLine(s)
}

// oneLine keeps a message on one line whatever the server sent.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
