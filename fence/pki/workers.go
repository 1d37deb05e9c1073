package pki

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// workerURIPrefix starts every subject alternative name URI that names a
// worker id a sidecar certificate may open sessions under
// ("urn:fencepost:worker:<path-escaped id>").
const workerURIPrefix = "fencepost:worker:"

// workerURI is the SAN URI naming worker id.
func workerURI(id string) *url.URL {
	return &url.URL{Scheme: "urn", Opaque: workerURIPrefix + url.PathEscape(id)}
}

// WorkerIDs returns the worker ids certificate c may open sessions under:
// its own name (CommonName) first, then every worker URI it carries
// (Request.WorkerIDs). The cluster refuses a session under any other id
// (DESIGN.md, trust), so one worker's certificate cannot write under
// another worker's name.
func WorkerIDs(c *x509.Certificate) []string {
	if c == nil {
		return nil
	}
	out := []string{c.Subject.CommonName}
	for _, u := range c.URIs {
		if u.Scheme != "urn" || !strings.HasPrefix(u.Opaque, workerURIPrefix) {
			continue
		}
		id, err := url.PathUnescape(strings.TrimPrefix(u.Opaque, workerURIPrefix))
		if err == nil && id != "" && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// MayUseWorker reports whether worker is one of ids (WorkerIDs): equal to
// an entry, or starting with an entry's prefix when the entry ends in "*"
// ("example-worker-*" covers the pods of a Deployment, whose names are the
// worker ids but are not known when the certificate is issued).
func MayUseWorker(ids []string, worker string) bool {
	for _, id := range ids {
		if id == worker {
			return true
		}
		if p, ok := strings.CutSuffix(id, "*"); ok && p != "" && strings.HasPrefix(worker, p) {
			return true
		}
	}
	return false
}

// WorkerIDsFromState is WorkerIDs of a connection's verified peer (nil
// without one).
func WorkerIDsFromState(cs *tls.ConnectionState) []string {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return nil
	}
	return WorkerIDs(cs.VerifiedChains[0][0])
}

// workerSANs checks and renders a request's extra worker ids.
func workerSANs(req Request) ([]*url.URL, error) {
	if len(req.WorkerIDs) > 0 && req.Role != RoleSidecar {
		return nil, fmt.Errorf("%w: worker ids are for sidecar certificates, not %s", ErrRequest, req.Role)
	}
	var out []*url.URL
	for _, id := range req.WorkerIDs {
		if id == "" || id == "*" || strings.Contains(strings.TrimSuffix(id, "*"), "*") {
			return nil, fmt.Errorf("%w: worker id %q: want an id, or a prefix ending in one '*'", ErrRequest, id)
		}
		out = append(out, workerURI(id))
	}
	return out, nil
}
