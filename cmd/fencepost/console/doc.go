// Package console is fencepost's operator console: a web UI served by
// `fencepost console` (and started by `fencepost dev`) that reads and acts
// on a lease cluster through the cluster's HTTP API with one certificate,
// the operator's or a reader's, exactly as `fencepost ctl` does. The
// browser never holds a client certificate and the console can never do
// more than that credential: a reader's console shows the actions disabled
// and refuses them with 403, and the cluster would refuse them too.
//
// It owns: the pages (server-rendered HTML that reads without JavaScript;
// a small script for live updates and confirmations), the one shared watch
// of the cluster's event feed that drives every open page's live updates
// over server-sent events, the access rules (Host check, CSRF token,
// login token, Content-Security-Policy), and the last hour of the five
// lease-mechanism metrics, scraped from the members' /metrics into minute
// buckets. Templates, style and script are embedded; nothing is fetched
// from elsewhere.
package console
