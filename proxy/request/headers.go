package request

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence"
	"github.com/fencepost/fencepost/proxy/leases"
)

// Worker-facing request headers the sidecar consumes and never forwards.
const (
	// HeaderTaskSelect names the task a request belongs to when the
	// sidecar holds several leases and the client cannot set a proxy user
	// name.
	HeaderTaskSelect = "X-Fencing-Task-Select"
	// HeaderActionID is a worker-chosen stable id of one logical action;
	// the sidecar derives the Idempotency-Key from it and the task id.
	HeaderActionID = "X-Fencing-Action-Id"
)

// fencingPrefix: every worker-sent header with this prefix is removed, so
// a worker can never forge or duplicate a stamp.
const fencingPrefix = "X-Fencing-"

// hopByHop are the RFC 9110 7.6.1 connection-specific headers, plus the
// legacy Proxy-Connection; none may be forwarded.
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// dropNames are the names a worker request header never keeps on the
// way upstream beyond hopByHop (see dropOnForward).
var dropNames = []string{fence.HeaderIdempotencyKey, "Host", "Content-Length", "Expect", "HTTP2-Settings"}

// maxNameLen bounds the lengths the by-length tables index; every name in
// hopByHop and dropNames is shorter.
const maxNameLen = 32

// hopByHopByLen and dropByLen hold the names of hopByHop and of hopByHop
// plus dropNames by length. Every forwarded header is checked against
// them, and a case-insensitive comparison with every name was a visible
// share of the proxy path's own CPU; names of another length can never
// match, so only the few of the same length are compared.
var hopByHopByLen, dropByLen = byLen(hopByHop), byLen(append(append([]string(nil), hopByHop...), dropNames...))

func byLen(names []string) (t [maxNameLen][]string) {
	for _, n := range names {
		t[len(n)] = append(t[len(n)], n)
	}
	return t
}

// inByLen reports whether name equals, ignoring case, one of the names in
// t. Like equalFold it is for header names, which are ASCII.
func inByLen(t *[maxNameLen][]string, name []byte) bool {
	if len(name) >= maxNameLen {
		return false
	}
	for _, h := range t[len(name)] {
		if bytes.EqualFold(name, []byte(h)) {
			return true
		}
	}
	return false
}

func isHopByHop(name []byte) bool { return inByLen(&hopByHopByLen, name) }

// equalFold is bytes.EqualFold with the length compared first: most
// header names differ from the one looked for in length. It is exact for
// header names, which fasthttp only accepts as ASCII token bytes (a
// non-ASCII fold such as U+212A for "k" could otherwise match at another
// length); values such as Connection tokens use bytes.EqualFold.
func equalFold(b []byte, s string) bool {
	return len(b) == len(s) && bytes.EqualFold(b, []byte(s))
}

func hasPrefixFold(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && bytes.EqualFold(b[:len(prefix)], []byte(prefix))
}

// reqScan is what one pass over a worker request's headers finds. Values
// are copies: fasthttp's iteration buffers do not outlive the loop.
type reqScan struct {
	connTokens [][]byte // header names listed in Connection
	proxyAuth  []string
	taskSelect []string
	actionID   []string
	idemKey    []string
	upgrade    bool
	expect     bool
	hasTE      bool
	hasCL      int
}

// scanRequest walks the headers once, case-insensitively (the server does
// not normalise names, so lookups by name cannot be trusted).
func scanRequest(h *fasthttp.RequestHeader) reqScan {
	var s reqScan
	for k, v := range h.All() {
		switch {
		case equalFold(k, "Connection"), equalFold(k, "Proxy-Connection"):
			for _, tok := range bytes.Split(v, []byte(",")) {
				if tok = bytes.TrimSpace(tok); len(tok) > 0 {
					s.connTokens = append(s.connTokens, bytes.Clone(tok))
				}
			}
		case equalFold(k, "Proxy-Authorization"):
			s.proxyAuth = append(s.proxyAuth, string(v))
		case equalFold(k, HeaderTaskSelect):
			s.taskSelect = append(s.taskSelect, string(v))
		case equalFold(k, HeaderActionID):
			s.actionID = append(s.actionID, string(v))
		case equalFold(k, fence.HeaderIdempotencyKey):
			s.idemKey = append(s.idemKey, string(v))
		case equalFold(k, "Upgrade"), equalFold(k, "HTTP2-Settings"):
			s.upgrade = true
		case equalFold(k, "Expect"):
			s.expect = true
		}
	}
	// fasthttp folds Content-Length and Transfer-Encoding into its framing
	// state (dropping a Content-Length that came with chunked encoding),
	// so conflicts are only visible in the raw header block.
	for line := range bytes.SplitSeq(h.RawHeaders(), []byte("\n")) {
		name, _, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		name = bytes.TrimSpace(name)
		switch {
		case equalFold(name, "Transfer-Encoding"):
			s.hasTE = true
		case equalFold(name, "Content-Length"):
			s.hasCL++
		}
	}
	return s
}

// dropOnForward reports whether a worker request header must not be
// forwarded: hop-by-hop, named in Connection, a fencing header (including
// the selection and action-id headers), Idempotency-Key (re-added after
// validation), Host and Content-Length (set from the target and the
// body), and Expect (the body has already been received).
func (s *reqScan) dropOnForward(k []byte) bool {
	if inByLen(&dropByLen, k) || hasPrefixFold(k, fencingPrefix) {
		return true
	}
	for _, t := range s.connTokens {
		if bytes.EqualFold(k, t) {
			return true
		}
	}
	return false
}

// copyRequestHeaders copies the forwardable headers of src into dst.
func copyRequestHeaders(dst, src *fasthttp.RequestHeader, scan *reqScan) {
	for k, v := range src.All() {
		if scan.dropOnForward(k) {
			continue
		}
		dst.AddBytesKV(k, v)
	}
}

// copyResponseHeaders copies an upstream response's end-to-end headers.
func copyResponseHeaders(dst, src *fasthttp.ResponseHeader) {
	var connTokens [][]byte
	for k, v := range src.All() {
		if equalFold(k, "Connection") {
			for _, tok := range bytes.Split(v, []byte(",")) {
				if tok = bytes.TrimSpace(tok); len(tok) > 0 {
					connTokens = append(connTokens, bytes.Clone(tok))
				}
			}
		}
	}
	for k, v := range src.All() {
		if isHopByHop(k) || equalFold(k, "Content-Length") {
			continue
		}
		skip := false
		for _, t := range connTokens {
			if bytes.EqualFold(k, t) {
				skip = true
				break
			}
		}
		if !skip {
			dst.AddBytesKV(k, v)
		}
	}
}

// stampHeaders sets exactly one set of fencing headers for the lease.
func stampHeaders(h *fasthttp.RequestHeader, l leases.Ref, holder string) {
	// The epoch is formatted as fence.FormatEpoch does, into a stack
	// buffer instead of a string per request.
	var b [20]byte
	h.SetBytesV(fence.HeaderToken, strconv.AppendUint(b[:0], l.Epoch, 10))
	h.Set(fence.HeaderTask, l.TaskID)
	h.Set(fence.HeaderHolder, holder)
	if l.Signature != "" {
		h.Set(fence.HeaderSignature, l.Signature)
	}
}

// selectedTask returns the task a request names: the Proxy-Authorization
// Basic user name, or the X-Fencing-Task-Select header. Both may be given
// only if they agree. "" means the request names none.
func selectedTask(s *reqScan) (string, error) {
	var fromAuth, fromHdr string
	if len(s.proxyAuth) > 1 || len(s.taskSelect) > 1 {
		return "", fmt.Errorf("repeated Proxy-Authorization or %s", HeaderTaskSelect)
	}
	if len(s.proxyAuth) == 1 {
		u, err := basicUser(s.proxyAuth[0])
		if err != nil {
			return "", err
		}
		fromAuth = u
	}
	if len(s.taskSelect) == 1 {
		fromHdr = s.taskSelect[0]
		if err := fence.ValidTask(fromHdr); err != nil {
			return "", fmt.Errorf("%s: %v", HeaderTaskSelect, err)
		}
	}
	if fromAuth != "" && fromHdr != "" && fromAuth != fromHdr {
		return "", fmt.Errorf("proxy user %q and %s %q disagree", fromAuth, HeaderTaskSelect, fromHdr)
	}
	if fromAuth != "" {
		return fromAuth, nil
	}
	return fromHdr, nil
}

// basicUser extracts the user name of a Basic credential. Clients put the
// HTTP_PROXY user info there already percent-decoded.
func basicUser(v string) (string, error) {
	const prefix = "basic "
	if len(v) < len(prefix) || !bytes.EqualFold([]byte(v[:len(prefix)]), []byte(prefix)) {
		return "", fmt.Errorf("Proxy-Authorization: only the Basic scheme names a task")
	}
	raw, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace([]byte(v[len(prefix):]))))
	if err != nil {
		return "", fmt.Errorf("Proxy-Authorization: bad base64")
	}
	user, _, _ := bytes.Cut(raw, []byte(":"))
	if len(user) == 0 {
		return "", nil
	}
	if err := fence.ValidTask(string(user)); err != nil {
		return "", fmt.Errorf("Proxy-Authorization user: %v", err)
	}
	return string(user), nil
}

// TaskOf returns the task a request's header selects (the proxy user
// name, or HeaderTaskSelect), "" when none: a CONNECT's task.
func TaskOf(h *fasthttp.RequestHeader) (string, error) {
	scan := scanRequest(h)
	return selectedTask(&scan)
}
