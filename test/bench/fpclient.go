package main

import (
	"encoding/json"
	"fmt"
	"github.com/fencepost/fencepost/fence/api"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// The wire shapes below mirror fence/api (the cluster's HTTP API) field
// for field, for the fields the harness uses. They are declared here rather
// than imported so this module does not carry the product's dependency
// graph, and a drift in the product's wire format shows up as a failed run.

// fpSession is the reply to POST /v1/sessions.
type fpSession struct {
	SessionID string `json:"sessionId"`
}

// fpHeld is one lease a heartbeat names.
type fpHeld struct {
	TaskID string `json:"taskId"`
	Epoch  uint64 `json:"epoch"`
}

// fpGrant is the part of a grant the harness reads.
type fpGrant struct {
	Lease struct {
		Epoch uint64 `json:"leaseEpoch"`
	} `json:"lease"`
}

// fpAcquireReq is the body of an acquire.
type fpAcquireReq struct {
	SessionID string `json:"sessionId"`
	Create    bool   `json:"create"`
	Profile   string `json:"profile,omitempty"`
}

// fpLeaseReq is the body of a release or a checkpoint.
type fpLeaseReq struct {
	SessionID string `json:"sessionId"`
	Epoch     uint64 `json:"epoch"`
	Outcome   string `json:"outcome,omitempty"`
	Step      string `json:"step,omitempty"`
	Data      []byte `json:"data,omitempty"`
}

// fpHeartbeatReq is the body of a heartbeat.
type fpHeartbeatReq struct {
	Leases []fpHeld `json:"leases,omitempty"`
}

// fpClusterStatus is the part of GET /v1/cluster the harness reads.
type fpClusterStatus struct {
	NodeID     string `json:"nodeId"`
	State      string `json:"state"`
	Leader     string `json:"leader"`
	LeaderHTTP string `json:"leaderHttp"`
	Members    []struct {
		ID       string `json:"id"`
		HTTPAddr string `json:"httpAddr"`
		Leader   bool   `json:"leader"`
	} `json:"members"`
}

// fpClient is a thin fasthttp client for one cluster endpoint: JSON in,
// JSON out, a fresh X-Request-Id on every mutating call.
type fpClient struct {
	addr   string
	hc     *fasthttp.HostClient
	prefix string
	seq    atomic.Uint64
}

// reqIDSeed makes request ids unique across clients in one run.
var reqIDSeed atomic.Uint64

// newFPClient returns a client for addr (host:port) with up to conns
// keep-alive connections and the given per-request timeout. In the TLS
// pass it speaks HTTPS with a sidecar certificate, as a sidecar does.
func newFPClient(addr string, conns int, timeout time.Duration) *fpClient {
	c := &fpClient{
		addr: addr,
		hc: &fasthttp.HostClient{
			Addr:         addr,
			MaxConns:     conns,
			ReadTimeout:  timeout,
			WriteTimeout: timeout,
			// Never retry: a retried mutation would be counted twice.
			RetryIfErr:                    func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
			MaxIdleConnDuration:           time.Minute,
			MaxConnWaitTimeout:            timeout,
			DisableHeaderNamesNormalizing: true,
		},
		prefix: fmt.Sprintf("b%d-%d-", time.Now().UnixNano()%1e9, reqIDSeed.Add(1)),
	}
	if sec != nil {
		c.hc.IsTLS, c.hc.TLSConfig = true, sec.fpSidecar
	}
	return c
}

// statusError is a non-2xx reply.
type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.code, e.body) }

// do sends method path with body in (nil for none) and decodes a 2xx reply
// into out (nil to discard).
func (c *fpClient) do(method, path string, in, out any) error {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = b
	}
	return c.doRaw(method, path, body, out)
}

// doRaw is do with the request body already encoded (nil for none).
func (c *fpClient) doRaw(method, path string, body []byte, out any) error {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI(scheme() + c.addr + path)
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(body)
	}
	if method != fasthttp.MethodGet {
		req.Header.Set("X-Request-Id", c.prefix+strconv.FormatUint(c.seq.Add(1), 36))
	}
	if err := c.hc.Do(req, resp); err != nil {
		return err
	}
	if code := resp.StatusCode(); code < 200 || code > 299 {
		body := string(resp.Body())
		if len(body) > 200 {
			body = body[:200]
		}
		return &statusError{code: code, body: strings.TrimSpace(body)}
	}
	if d, ok := out.(interface{ decodeBody([]byte) error }); ok {
		return d.decodeBody(resp.Body())
	}
	if out != nil {
		return json.Unmarshal(resp.Body(), out)
	}
	return nil
}

// taskPath fills a task route: /v1/tasks/{id}/<verb>.
func taskPath(id, verb string) string { return "/v1/tasks/" + url.PathEscape(id) + "/" + verb }

// openSession opens a session for worker and returns its id. With TLS
// every session is the bench sidecar certificate's own worker id: the
// cluster refuses one under a name the certificate does not carry.
func (c *fpClient) openSession(worker string) (string, error) {
	if c.hc.IsTLS {
		worker = benchSidecar
	}
	var s fpSession
	err := c.do("POST", "/v1/sessions", map[string]string{"workerId": worker}, &s)
	return s.SessionID, err
}

// acquire grants task to session sid, creating it with profile if missing,
// and returns the fencing token.
func (c *fpClient) acquire(task, sid, profile string) (uint64, error) {
	var g fpGrant
	err := c.do("POST", taskPath(task, "acquire"),
		fpAcquireReq{SessionID: sid, Create: true, Profile: profile}, &g)
	if err == nil && g.Lease.Epoch == 0 {
		err = fmt.Errorf("grant without an epoch")
	}
	return g.Lease.Epoch, err
}

// release gives task back (it becomes pending again, claimable at once).
func (c *fpClient) release(task, sid string, epoch uint64) error {
	return c.do("POST", taskPath(task, "release"),
		fpLeaseReq{SessionID: sid, Epoch: epoch, Outcome: "given_back"}, nil)
}

// checkpoint records a checkpoint under epoch.
func (c *fpClient) checkpoint(task, sid string, epoch uint64, step string, data []byte) error {
	return c.do("POST", taskPath(task, "checkpoint"),
		fpLeaseReq{SessionID: sid, Epoch: epoch, Step: step, Data: data}, nil)
}

// fpBeat is one session's heartbeat, encoded once: a sidecar names the
// same leases in every heartbeat until one of them changes, so a client
// need not re-encode the body each time.
type fpBeat struct {
	path string
	body []byte
	n    int // leases named
}

// newBeat encodes the heartbeat of session sid naming held.
func newBeat(sid string, held []fpHeld) fpBeat {
	b, err := json.Marshal(fpHeartbeatReq{Leases: held})
	if err != nil {
		panic(err) // a struct of strings and integers always encodes
	}
	return fpBeat{path: "/v1/sessions/" + url.PathEscape(sid) + "/heartbeat", body: b, n: len(held)}
}

// heartbeat renews session sid and the leases it names; it returns how many
// leases the reply says are renewed.
func (c *fpClient) heartbeat(sid string, held []fpHeld) (int, error) {
	return c.beat(newBeat(sid, held))
}

// beat sends a prepared heartbeat; only a reply renewing every lease it
// names counts as a success.
func (c *fpClient) beat(hb fpBeat) (int, error) {
	var r beatReply
	if err := c.doRaw("POST", hb.path, hb.body, &r); err != nil {
		return 0, err
	}
	if r.renewed < hb.n {
		return r.renewed, fmt.Errorf("heartbeat renewed %d of %d leases", r.renewed, hb.n)
	}
	return r.renewed, nil
}

// beatReply is what the harness reads of a heartbeat's reply: how many
// leases it renewed.
type beatReply struct{ renewed int }

// decodeBody parses a heartbeat reply as a sidecar does (the hand parser
// of the plain shape, encoding/json otherwise): the load generator shares
// the machine with the cluster, and a client decoding by reflection took
// CPU the members then lacked, where etcd's client decodes generated
// protobuf.
func (r *beatReply) decodeBody(body []byte) error {
	resp, ok := api.ParseHeartbeatResponse(body)
	if !ok {
		if err := json.Unmarshal(body, &resp); err != nil {
			return err
		}
	}
	r.renewed = 0
	for _, l := range resp.Leases {
		if l.ValidForMs > 0 && (l.Signal == "" || l.Signal == api.SignalRevived) {
			r.renewed++
		}
	}
	return nil
}

// status reads GET /v1/cluster from this endpoint.
func (c *fpClient) status() (fpClusterStatus, error) {
	var s fpClusterStatus
	err := c.do("GET", "/v1/cluster", nil, &s)
	return s, err
}
