package proxy

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/fence"
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

func isHopByHop(name []byte) bool {
	for _, h := range hopByHop {
		if bytes.EqualFold(name, []byte(h)) {
			return true
		}
	}
	return false
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
		case bytes.EqualFold(k, []byte("Connection")), bytes.EqualFold(k, []byte("Proxy-Connection")):
			for _, tok := range bytes.Split(v, []byte(",")) {
				if tok = bytes.TrimSpace(tok); len(tok) > 0 {
					s.connTokens = append(s.connTokens, bytes.Clone(tok))
				}
			}
		case bytes.EqualFold(k, []byte("Proxy-Authorization")):
			s.proxyAuth = append(s.proxyAuth, string(v))
		case bytes.EqualFold(k, []byte(HeaderTaskSelect)):
			s.taskSelect = append(s.taskSelect, string(v))
		case bytes.EqualFold(k, []byte(HeaderActionID)):
			s.actionID = append(s.actionID, string(v))
		case bytes.EqualFold(k, []byte(fence.HeaderIdempotencyKey)):
			s.idemKey = append(s.idemKey, string(v))
		case bytes.EqualFold(k, []byte("Upgrade")), bytes.EqualFold(k, []byte("HTTP2-Settings")):
			s.upgrade = true
		case bytes.EqualFold(k, []byte("Expect")):
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
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			s.hasTE = true
		case bytes.EqualFold(name, []byte("Content-Length")):
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
	if isHopByHop(k) || hasPrefixFold(k, fencingPrefix) ||
		bytes.EqualFold(k, []byte(fence.HeaderIdempotencyKey)) ||
		bytes.EqualFold(k, []byte("Host")) || bytes.EqualFold(k, []byte("Content-Length")) ||
		bytes.EqualFold(k, []byte("Expect")) || bytes.EqualFold(k, []byte("HTTP2-Settings")) {
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
		if bytes.EqualFold(k, []byte("Connection")) {
			for _, tok := range bytes.Split(v, []byte(",")) {
				if tok = bytes.TrimSpace(tok); len(tok) > 0 {
					connTokens = append(connTokens, bytes.Clone(tok))
				}
			}
		}
	}
	for k, v := range src.All() {
		if isHopByHop(k) || bytes.EqualFold(k, []byte("Content-Length")) {
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

// stamp sets exactly one set of fencing headers for the lease.
func stamp(h *fasthttp.RequestHeader, l leaseSnap, holder string) {
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
