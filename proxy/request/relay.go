package request

import (
	"errors"
	"io"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/fencepost/fencepost/proxy/clock"
	"github.com/fencepost/fencepost/proxy/leases"
)

// relay streams an upstream response body to the worker. fasthttp reads
// it after the handler returns, so it owns the upstream request and
// response until Close. It stops at MaxResponseBody, and a write's relay
// stops as soon as its lease may no longer write.
type relay struct {
	p     *Pipeline // nil for the handler's own small-body read
	r     io.Reader
	resp  *fasthttp.Response
	req   *fasthttp.Request
	t     leases.Ticket // a write's lease generation; zero for reads
	clock clock.Clock
	max   int64
	n     int64
	once  sync.Once
}

var errResponseTooLarge = errors.New("upstream response exceeds MaxResponseBody")

func (r *relay) Read(p []byte) (int, error) {
	if !r.t.IsZero() {
		if r.t.MayWrite(r.clock.Now()) != "" {
			return 0, errLeaseCut
		}
	}
	if r.max > 0 && r.n >= r.max {
		return 0, errResponseTooLarge
	}
	if r.max > 0 && int64(len(p)) > r.max-r.n+1 {
		p = p[:r.max-r.n+1]
	}
	n, err := r.r.Read(p)
	r.n += int64(n)
	if r.max > 0 && r.n > r.max {
		return n - int(r.n-r.max), errResponseTooLarge
	}
	return n, err
}

// Close releases the upstream response (closing or returning its
// connection) and the request: the one release of an exchange whose
// body was streamed.
func (r *relay) Close() error {
	r.once.Do(func() {
		_ = r.resp.CloseBodyStream()
		fasthttp.ReleaseResponse(r.resp)
		fasthttp.ReleaseRequest(r.req)
		r.p.inflight.Add(-1)
	})
	return nil
}

// readFull is io.ReadFull without the interface call that would move
// the relay to the heap.
func readFull(r *relay, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := r.Read(p[n:])
		n += m
		if err != nil {
			if n == len(p) {
				return n, nil
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
	}
	return n, nil
}
